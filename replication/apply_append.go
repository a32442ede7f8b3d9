package replication

import (
	"fmt"
	"time"

	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/log"
)

// ErrRecordTooLarge means a batch exceeds the topic's max.message.bytes.
var ErrRecordTooLarge = fmt.Errorf("replication: record batch larger than the topic allows")

// validateAppend checks every batch of an Append against the topic before
// anything is written, so an Append is applied whole or not at all.
func validateAppend(t *Topic, a Append) error {
	if len(a.Batches) == 0 {
		return fmt.Errorf("%w: append without batches", ErrInvalidArgument)
	}
	max := t.MaxBatchBytes()
	seen := make(map[int32]bool, len(a.Batches))
	for _, b := range a.Batches {
		if b.Partition < 0 || int(b.Partition) >= len(t.Partitions) {
			return fmt.Errorf("%w: %s has %d partitions, not %d", ErrUnknownPartition, t.Name, len(t.Partitions), b.Partition)
		}
		if seen[b.Partition] {
			// One batch per partition per command keeps idempotency by Raft
			// index exact: a partition holds at most one batch per index.
			return fmt.Errorf("%w: partition %d twice in one append", ErrInvalidArgument, b.Partition)
		}
		seen[b.Partition] = true
		if int64(len(b.Batch)) > max {
			return fmt.Errorf("%w: batch of %d bytes for %s-%d, max.message.bytes is %d", ErrRecordTooLarge, len(b.Batch), t.Name, b.Partition, max)
		}
		info, err := batch.Verify(b.Batch)
		if err == nil && info.Length != len(b.Batch) {
			err = fmt.Errorf("%d bytes after the batch", len(b.Batch)-info.Length)
		}
		if err != nil {
			return fmt.Errorf("%w: %s-%d: %v", ErrInvalidArgument, t.Name, b.Partition, err)
		}
	}
	return nil
}

func (f *FSM) applyAppend(index uint64, now int64, a Append) any {
	t, err := f.Topic(a.Topic)
	if err != nil {
		return err
	}
	if err := validateAppend(t, a); err != nil {
		return err
	}
	res := AppendResult{BaseOffsets: make([]int64, len(a.Batches))}
	meta := log.AppendMeta{AppliedIndex: index, Time: time.Unix(0, now)}
	for i, b := range a.Batches {
		p := t.Partitions[b.Partition]
		if index <= p.log.AppliedIndex() {
			// Replayed after a restart: this partition already holds it.
			res.BaseOffsets[i] = -1
			continue
		}
		base, err := p.log.Append(b.Batch, meta)
		if err != nil {
			return f.stop(fmt.Errorf("append %s-%d at index %d: %w", a.Topic, b.Partition, index, err))
		}
		res.BaseOffsets[i] = base
		f.bytesSinceSnapshot.Add(int64(len(b.Batch)))
	}
	for _, b := range a.Batches {
		t.Partitions[b.Partition].signal()
	}
	return res
}
