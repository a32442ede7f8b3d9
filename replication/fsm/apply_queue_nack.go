package fsm

import (
	"fmt"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/queue"
)

func (f *FSM) applyQueueNack(index uint64, now int64, c QueueNack) any {
	if t, err := f.Topic(c.Topic); err == nil {
		parts := make([]int32, len(c.Nacks))
		for i, n := range c.Nacks {
			parts[i] = n.Token.Partition
		}
		if err := checkHosted(t, parts...); err != nil {
			return err
		}
	}
	var res backend.QueueTokensResult
	return f.applyQueueFailing(index, now, c.Topic, c.Group, func(q *queue.Group) *int {
		res.Results = q.Nack(now, c.Nacks)
		return &res.DeadLettered
	}, func() any { return res })
}

// applyQueueFailing applies a command that fails deliveries (a nack, a
// release) to a queue group under its lock: op fails them and returns
// where the result counts the dead letters, which move to the
// dead-letter topic in this same command (a permanent nack, or a record
// at its last allowed delivery); result is then the command's result.
func (f *FSM) applyQueueFailing(index uint64, now int64, topic, group string, op func(*queue.Group) *int, result func() any) any {
	t, err := f.Topic(topic)
	if err != nil {
		return err
	}
	f.queues.mu.Lock()
	defer f.queues.mu.Unlock()
	q, err := f.queues.getLocked(topic, group)
	if err != nil {
		return err
	}
	dead := op(q)
	f.queues.signalReturned(topic, group)
	src := f.newQueueSource(t, q.Config().DeadlineHeader, f.queues.windowsLocked(t))
	if *dead, err = f.flushDeadLetters(index, now, q, t, src); err != nil {
		return f.stop(fmt.Errorf("apply index %d: %w", index, err))
	}
	return result()
}
