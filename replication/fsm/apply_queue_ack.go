package fsm

import (
	"fmt"

	"github.com/logd-dev/logd/backend"
)

func (f *FSM) applyQueueAck(_ uint64, now int64, c QueueAck) any {
	f.queues.mu.Lock()
	defer f.queues.mu.Unlock()
	q, err := f.queues.getLocked(c.Topic, c.Group)
	if err != nil {
		return err
	}
	t, err := f.Topic(c.Topic)
	if err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	if err := checkHosted(t, TokenPartitions(c.Tokens)...); err != nil {
		return err
	}
	return backend.QueueTokensResult{Results: q.Ack(now, c.Tokens)}
}
