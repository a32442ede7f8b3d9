package fsm

import (
	"fmt"

	"github.com/logd-dev/logd/backend"
)

// TrimResult is the outcome of an applied Trim.
type TrimResult struct {
	Segments     int   // segments deleted
	BytesDeleted int64 // their bytes
}

// cleanerPartition finds the partition a retention command names, in the
// topic incarnation it was planned for.
func (f *FSM) cleanerPartition(topic string, incarnation uint64, partition int32) (*Topic, *Partition, error) {
	t, err := f.Topic(topic)
	if err != nil {
		return nil, nil, err
	}
	if t.CreateIndex != incarnation {
		return nil, nil, fmt.Errorf("%w: %q was recreated", backend.ErrUnknownTopic, topic)
	}
	p, err := t.Partition(partition)
	if err != nil {
		return nil, nil, err
	}
	return t, p, nil
}

func (f *FSM) applyTrim(index uint64, now int64, c Trim) any {
	t, p, err := f.cleanerPartition(c.Topic, c.TopicIndex, c.Partition)
	if err != nil {
		return err
	}
	// Never past what a consumer protects, whatever the leader planned.
	below := min(c.Below, f.ProtectedFrom(t, c.Partition))
	before := p.log.Size()
	n, err := p.log.DeleteBefore(below)
	if err != nil {
		return f.stop(fmt.Errorf("trim %s-%d below %d at index %d: %w", c.Topic, c.Partition, below, index, err))
	}
	res := TrimResult{Segments: n, BytesDeleted: before - p.log.Size()}
	if n > 0 {
		f.cleaner.retire(p.log)
		f.segmentsChanged.Store(true)
		f.cleaner.trims.Add(1)
		f.cleaner.bytesDeleted.Add(res.BytesDeleted)
		f.cleaner.setRun(partKey{c.Topic, c.TopicIndex, c.Partition}, backend.CleanerRun{TimeNanos: now, Action: "trim", BytesDeleted: res.BytesDeleted})
	}
	return res
}
