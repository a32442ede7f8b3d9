package fsm

import "github.com/logd-dev/logd/backend"

func (f *FSM) applyQueueExtend(_ uint64, now int64, c QueueExtend) any {
	t, err := f.Topic(c.Topic)
	if err != nil {
		return err
	}
	if err := checkHosted(t, TokenPartitions(c.Tokens)...); err != nil {
		return err
	}
	f.queues.mu.Lock()
	defer f.queues.mu.Unlock()
	q, err := f.queues.getLocked(c.Topic, c.Group)
	if err != nil {
		return err
	}
	rs, err := q.Extend(now, c.Tokens, c.Lease)
	if err != nil {
		return err
	}
	return backend.QueueTokensResult{Results: rs}
}
