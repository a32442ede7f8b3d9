package fsm

import (
	"errors"
	"fmt"

	"github.com/logd-dev/logd/queue"
)

// QueueSetStarts moves the start offsets of some partitions of a queue
// group (queue.Group.SetStarts), at QueueStartsLevel: the Kafka listener
// proposes it for AlterShareGroupOffsets (docs/kafka.md, "Share
// groups"). It is refused, changing nothing, while a record of the group
// is under a live lease (queue.ErrGroupBusy) and for a start outside a
// partition's [0, end] (queue.ErrInvalidRequest).
type QueueSetStarts struct {
	Topic  string                 `json:"topic"`
	Group  string                 `json:"group"`
	Starts []queue.PartitionStart `json:"starts"`
}

func (f *FSM) applyQueueSetStarts(index uint64, now int64, c QueueSetStarts) any {
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
	src := f.newQueueSource(t, q.Config().DeadlineHeader, f.queues.windowsLocked(t))
	if err := q.SetStarts(now, c.Starts, src, queueEnds(t)); err != nil {
		if isQueueRefusal(err) {
			return err
		}
		// The scan that sizes the new backlog failed (I/O): the group is
		// half reset.
		return f.stop(fmt.Errorf("apply index %d: move the starts of queue group %s/%s: %w", index, c.Topic, c.Group, err))
	}
	return nil
}

// QueueDelete deletes a queue group of a topic, at QueueStartsLevel: its
// leases, backlog and counts are forgotten (its dead-letter topic, an
// ordinary topic, stays). The Kafka listener proposes it for
// DeleteShareGroupOffsets. It is refused while a record of the group is
// under a live lease (queue.ErrGroupBusy).
type QueueDelete struct {
	Topic string `json:"topic"`
	Group string `json:"group"`
}

func (f *FSM) applyQueueDelete(_ uint64, now int64, c QueueDelete) any {
	if _, err := f.Topic(c.Topic); err != nil {
		return err
	}
	f.queues.mu.Lock()
	defer f.queues.mu.Unlock()
	q, err := f.queues.getLocked(c.Topic, c.Group)
	if err != nil {
		return err
	}
	if recs, _ := q.InFlight(now, 1); len(recs) > 0 {
		return fmt.Errorf("%w: %s on topic %s: partition %d offset %d is leased", queue.ErrGroupBusy, c.Group, c.Topic, recs[0].Partition, recs[0].Offset)
	}
	delete(f.queues.byTopic[c.Topic], c.Group)
	if len(f.queues.byTopic[c.Topic]) == 0 {
		delete(f.queues.byTopic, c.Topic)
	}
	return nil
}

// isQueueRefusal reports whether err is a refusal of package queue (it
// changed nothing), as opposed to a failure of the record source.
func isQueueRefusal(err error) bool {
	for _, s := range []error{queue.ErrGroupBusy, queue.ErrInvalidRequest, queue.ErrGroupNotFound, queue.ErrInvalidConfig} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
