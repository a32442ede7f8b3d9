package queue

// Backlog age: when each unfinished record was appended (the append
// command's time, not the producer's timestamp), so admission control can
// bound the age of a group's oldest unfinished record and every replica
// decides the same. A partition keeps marks (offset, time): the records
// from a mark's offset up to the next mark were appended at the mark's
// time. One mark per append (appends at one time share one), at most
// maxAppendMarks per partition: past that, neighbouring marks merge into
// the older one, so a record may count as older than it is (admission
// refuses early, never late), and memory does not grow with the backlog.
// Marks below the oldest unfinished record are dropped.

// maxAppendMarks bounds a partition's append marks.
const maxAppendMarks = 256

// appendMark says that records from Offset on were appended at At (Unix
// ns), up to the next mark.
type appendMark struct {
	Offset int64 `json:"o"`
	At     int64 `json:"t"`
}

// Appended is one applied append to a partition of the group's topic, as
// NoteAppend counts it.
type Appended struct {
	Partition int32
	// Base is the offset of the first record, Records their number.
	Base, Records int64
	// BatchBytes is the batches' size (for the estimate), RecordBytes the
	// sum of the records' RecordInfo.Size (for exact bytes).
	BatchBytes, RecordBytes int64
	// At is the append command's time, Unix ns.
	At int64
}

// markAppend records that records from base on were appended at at.
func (p *partitionState) markAppend(base, at int64) {
	p.trimMarks()
	if n := len(p.Appended); n > 0 && (p.Appended[n-1].At >= at || p.Appended[n-1].Offset >= base) {
		return // the same time (or an offset already marked): one mark
	}
	p.Appended = append(p.Appended, appendMark{Offset: base, At: at})
	if len(p.Appended) > maxAppendMarks {
		// Merge each pair into its older mark.
		out := p.Appended[:0]
		for i := 0; i < len(p.Appended); i += 2 {
			out = append(out, p.Appended[i])
		}
		clear(p.Appended[len(out):])
		p.Appended = out
	}
}

// trimMarks drops marks wholly below Start.
func (p *partitionState) trimMarks() {
	i := 0
	for i+1 < len(p.Appended) && p.Appended[i+1].Offset <= p.Start {
		i++
	}
	if i > 0 {
		p.Appended = append(p.Appended[:0], p.Appended[i:]...)
	}
}

// appendedAt returns the append time of the record at offset (by the
// marks), and false when no mark covers it.
func (p *partitionState) appendedAt(offset int64) (int64, bool) {
	at, ok := int64(0), false
	for _, m := range p.Appended {
		if m.Offset > offset {
			break
		}
		at, ok = m.At, true
	}
	return at, ok
}

// OldestAppend returns the append time (Unix ns) of the group's oldest
// unfinished record, over every partition — ready, in flight, backing off
// or waiting for the dead-letter topic, and whether the group is paused or
// not — and false when the group has none or does not track append times
// (before SetExactBytes). ends holds the partitions' end offsets as of the
// command.
func (q *Group) OldestAppend(ends []int64) (int64, bool) {
	if !q.exact {
		return 0, false
	}
	oldest, ok := int64(0), false
	for pi, p := range q.parts {
		if pi >= len(ends) || p.Start >= ends[pi] {
			continue
		}
		if at, found := p.appendedAt(p.Start); found && (!ok || at < oldest) {
			oldest, ok = at, true
		}
	}
	return oldest, ok
}

// AppendedBefore counts the group's unfinished records appended at or
// before cutoff (by the marks; finished records between unfinished ones
// count too): the excess a bound on the backlog's age must drain.
func (q *Group) AppendedBefore(cutoff int64, ends []int64) int64 {
	var n int64
	for pi, p := range q.parts {
		if pi >= len(ends) || p.Start >= ends[pi] {
			continue
		}
		upTo := ends[pi]
		for _, m := range p.Appended {
			if m.At > cutoff {
				upTo = min(upTo, m.Offset)
				break
			}
		}
		n += max(upTo-p.Start, 0)
	}
	return n
}
