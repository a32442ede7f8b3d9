package queue

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

// NoteAppend counts records appended to a partition of the group's topic,
// so the group knows the mean size of its records. The caller calls it for
// every applied append, replays included (the counts are snapshot state).
func (q *Group) NoteAppend(partition int32, records, bytes int64) {
	if partition < 0 || int(partition) >= len(q.parts) || records <= 0 {
		return
	}
	p := q.parts[partition]
	p.AppendedRecords += records
	p.AppendedBytes += bytes
}

// Backlog is a group's unfinished work: records ready (fresh ones
// included), in flight, delayed or waiting for the dead-letter topic.
type Backlog struct {
	Records int64
	// Bytes is an estimate: Records times the mean size of the records
	// appended since the group began (batch overhead included).
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
		b.Bytes = satAdd(b.Bytes, satMul(n, p.meanRecordBytes()))
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
