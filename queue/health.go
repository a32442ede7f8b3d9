package queue

import "fmt"

// Backpressure inputs: where a group's unfinished records start, and how
// large its backlog is. All of it is derived from replicated state, so
// Apply may decide with it.

// PartitionStart returns the offset below which every record of a
// partition is finished (acked or dead-lettered); retention must keep
// everything at or above it. ok is false for an unknown partition.
func (q *Group) PartitionStart(partition int32) (start int64, ok bool) {
	if partition < 0 || int(partition) >= len(q.parts) {
		return 0, false
	}
	return q.parts[partition].Start, true
}

// NoteAppend counts an append to a partition of the group's topic: its
// batch bytes feed the mean record size of the estimate, and once the
// group counts exact bytes (SetExactBytes) its records' sizes the backlog's
// bytes and its time the backlog's age (age.go). The caller calls it for
// every applied append, replays included (the counts are snapshot state).
func (q *Group) NoteAppend(a Appended) {
	if a.Partition < 0 || int(a.Partition) >= len(q.parts) || a.Records <= 0 {
		return
	}
	p := q.parts[a.Partition]
	p.AppendedRecords += a.Records
	p.AppendedBytes += a.BatchBytes
	if q.exact {
		p.FreshBytes += a.RecordBytes
		p.markAppend(a.Base, a.At)
	}
}

// SetExactBytes makes the group keep the state of feature level 6 from now
// on: the exact bytes of its backlog, the append times of its records
// (age.go) and their attempt histories (history.go, starting with the
// running deliveries): it sizes every unfinished
// tracked record and every record in [Next, end) through src (ends as of
// the command), once, and counts the records already there as appended at
// now (their append times are not known). The caller calls
// it at the same command on every replica (when the state machine first
// applies the level that brings exact bytes, or when it creates the group
// at that level), so every replica counts the same. An error (I/O) leaves
// the group half-sized: the caller must stop.
func (q *Group) SetExactBytes(src RecordSource, ends []int64, now int64) error {
	if len(ends) != len(q.parts) {
		return fmt.Errorf("%w: %d end offsets for %d partitions", ErrInvalidRequest, len(ends), len(q.parts))
	}
	for pi, p := range q.parts {
		part := int32(pi)
		p.LiveBytes, p.FreshBytes = 0, 0
		for _, r := range p.Tracked {
			r.Size = 0
			if r.State.finished() {
				continue
			}
			info, err := src.RecordInfo(part, r.Offset)
			if err != nil {
				return err
			}
			r.Size = int64(info.Size)
			p.LiveBytes += r.Size
			r.History, r.HistoryDropped = nil, 0
			if r.State == leaseInFlight {
				// The running delivery's attempt, so its end is told.
				r.History = []Attempt{{Delivery: r.Deliveries, Claimed: r.Last, Worker: r.Worker, LeaseUntil: r.Until, Extends: r.Extends}}
			}
		}
		for off := p.Next; off < ends[pi]; off++ {
			info, err := src.RecordInfo(part, off)
			if err != nil {
				return err
			}
			if info.Exists {
				p.FreshBytes += int64(info.Size)
			}
		}
		p.Appended = nil
		if p.Start < ends[pi] {
			p.Appended = []appendMark{{Offset: p.Start, At: now}}
		}
	}
	q.exact = true
	return nil
}

// ExactBytes reports whether the group counts the exact bytes of its
// backlog (SetExactBytes); before, Backlog.Bytes is an estimate.
func (q *Group) ExactBytes() bool { return q.exact }

// Backlog is a group's unfinished work: records ready (fresh ones
// included), in flight, delayed or waiting for the dead-letter topic.
type Backlog struct {
	Records int64
	// Bytes sums the sizes (RecordInfo.Size: key, value, header keys and
	// values) of those records when the group counts exact bytes; before,
	// it is an estimate: Records times the mean size of the records
	// appended since the group began, batch overhead included.
	Bytes int64
}

// Backlog returns the group's unfinished work over all partitions; ends
// holds the partitions' end offsets as of the command.
func (q *Group) Backlog(ends []int64) Backlog {
	var b Backlog
	for pi, p := range q.parts {
		n := int64(p.Live)
		if pi < len(ends) && ends[pi] > p.Next {
			n += ends[pi] - p.Next
		}
		b.Records += n
		if q.exact {
			b.Bytes = satAdd(b.Bytes, max(p.LiveBytes+p.FreshBytes, 0))
		} else {
			b.Bytes = satAdd(b.Bytes, satMul(n, p.meanRecordBytes()))
		}
	}
	return b
}

// meanRecordBytes is the mean appended bytes per record (0 before any).
func (p *partitionState) meanRecordBytes() int64 {
	if p.AppendedRecords <= 0 {
		return 0
	}
	return (p.AppendedBytes + p.AppendedRecords - 1) / p.AppendedRecords
}

const maxInt64 = int64(^uint64(0) >> 1)

func satAdd(a, b int64) int64 {
	if a > maxInt64-b {
		return maxInt64
	}
	return a + b
}

func satMul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > maxInt64/b {
		return maxInt64
	}
	return a * b
}
