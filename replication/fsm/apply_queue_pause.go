package fsm

import "github.com/logd-dev/logd/backend"

// QueuePause pauses (Paused) or resumes a queue group: while paused, claims
// deliver nothing; leases already given keep running and counts are kept.
type QueuePause struct {
	Topic  string `json:"topic"`
	Group  string `json:"group"`
	Paused bool   `json:"paused"`
}

func (f *FSM) applyQueuePause(_ uint64, _ int64, c QueuePause) any {
	f.queues.mu.Lock()
	defer f.queues.mu.Unlock()
	q, err := f.queues.getLocked(c.Topic, c.Group)
	if err != nil {
		return err
	}
	changed := q.SetPaused(c.Paused)
	return backend.QueuePauseResult{Paused: q.Paused(), Changed: changed}
}

// QueueGroupPaused reports whether a queue group is paused.
func (f *FSM) QueueGroupPaused(topic, name string) (bool, error) {
	f.queues.mu.RLock()
	defer f.queues.mu.RUnlock()
	q, err := f.queues.getLocked(topic, name)
	if err != nil {
		return false, err
	}
	return q.Paused(), nil
}
