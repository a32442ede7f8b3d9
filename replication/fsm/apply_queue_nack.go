package fsm

import (
	"fmt"

	"github.com/logd-dev/logd/backend"
)

func (f *FSM) applyQueueNack(index uint64, now int64, c QueueNack) any {
	t, err := f.Topic(c.Topic)
	if err != nil {
		return err
	}
	f.queues.mu.Lock()
	defer f.queues.mu.Unlock()
	q, err := f.queues.getLocked(c.Topic, c.Group)
	if err != nil {
		return err
	}
	res := backend.QueueTokensResult{Results: q.Nack(now, c.Nacks)}
	// A permanent nack (or one after the last allowed delivery) moves the
	// record to the dead-letter topic in this same command.
	src := f.newQueueSource(t, q.Config().DeadlineHeader, f.queues.windowsLocked(t))
	if res.DeadLettered, err = f.flushDeadLetters(index, now, q, t, src); err != nil {
		return f.stop(fmt.Errorf("apply index %d: %w", index, err))
	}
	return res
}
