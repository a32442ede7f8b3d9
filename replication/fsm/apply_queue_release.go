package fsm

import (
	"fmt"

	"github.com/logd-dev/logd/backend"
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
	res := backend.QueueReleaseResult{Released: q.Release(now, c.Worker, c.Why)}
	// A record released after its last allowed delivery moves to the
	// dead-letter topic in this same command.
	src := f.newQueueSource(t, q.Config().DeadlineHeader, f.queues.windowsLocked(t))
	if res.DeadLettered, err = f.flushDeadLetters(index, now, q, t, src); err != nil {
		return f.stop(fmt.Errorf("apply index %d: %w", index, err))
	}
	return res
}
