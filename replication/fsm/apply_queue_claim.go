package fsm

import (
	"errors"
	"fmt"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/queue"
)

func (f *FSM) applyQueueClaim(index uint64, now int64, c QueueClaim) any {
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
	res, err := q.Claim(queue.ClaimRequest{
		Now: now, Index: index, Max: int(c.Max), MaxBytes: int(c.MaxBytes), Lease: c.Lease, Ends: queueEnds(t), Worker: c.Worker,
	}, src)
	if errors.Is(err, queue.ErrInvalidRequest) {
		return err // checked before anything changed
	}
	if err != nil {
		return f.stop(fmt.Errorf("apply index %d: claim %s/%s: %w", index, c.Topic, c.Group, err))
	}
	out := backend.QueueClaimResult{AtCap: res.AtCap, Records: make([]backend.ClaimedRecord, 0, len(res.Deliveries)), Paused: q.Paused()}
	for _, d := range res.Deliveries {
		r, err := src.record(d.Partition, d.Offset)
		if err != nil || r == nil {
			return f.stop(fmt.Errorf("apply index %d: claim %s/%s: record %d@%d vanished: %v", index, c.Topic, c.Group, d.Partition, d.Offset, err))
		}
		out.Records = append(out.Records, backend.ClaimedRecord{Delivery: d, Record: *r})
	}
	if out.DeadLettered, err = f.flushDeadLetters(index, now, q, t, src); err != nil {
		return f.stop(fmt.Errorf("apply index %d: %w", index, err))
	}
	return out
}
