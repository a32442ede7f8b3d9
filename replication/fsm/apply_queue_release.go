package fsm

import (
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/queue"
)

// QueueRelease ends the live leases of a queue group whose claims named
// Worker, offering their records again at once (queue.Group.Release),
// at QueueReleaseLevel. The Kafka listener proposes it for a share-group
// member whose session timed out or that joins a new leader
// (docs/kafka.md, "Share groups").
type QueueRelease struct {
	Topic  string `json:"topic"`
	Group  string `json:"group"`
	Worker string `json:"worker"`
	// Why is the released deliveries' error text, kept in their history.
	Why string `json:"why,omitempty"`
}

func (f *FSM) applyQueueRelease(index uint64, now int64, c QueueRelease) any {
	var res backend.QueueReleaseResult
	return f.applyQueueFailing(index, now, c.Topic, c.Group, func(q *queue.Group) *int {
		res.Released = q.Release(now, c.Worker, c.Why)
		return &res.DeadLettered
	}, func() any { return res })
}
