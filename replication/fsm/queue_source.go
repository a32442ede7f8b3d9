package fsm

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/queue"
)

// queueReadBytes is how much a claim reads from a partition log at a time.
const queueReadBytes = 1 << 20

// queueSource looks records up in a topic's partition logs for a claim. It
// keeps the last decoded window of each partition, so a claim of
// consecutive offsets reads each batch once. Offsets a claim asks about are
// below the partition's end as of the command, so the answer is the same on
// every replica and on replay.
type queueSource struct {
	t              *Topic
	deadlineHeader string
	windows        map[int32][]batch.Record
	// decodes tells the codecs whose records are read (FSM.decodes); the
	// others' records are skipped.
	decodes func(batch.Compression) bool
	// strictDeadline: an unreadable deadline header makes the record
	// undeliverable (from QueueLevel; before, it was no deadline).
	strictDeadline bool
}

// newQueueSource returns a source over t's logs. windows, if not nil, is a
// cache of decoded windows kept across commands (queueGroups.windows, for
// the Raft goroutine only): records below a partition's end never change
// while a queue group still needs them (retention and compaction leave
// unfinished queue records alone), so a cached record is the same as a
// re-read one and determinism does not depend on the cache (the state
// machine drops it when its applied level changes what is read,
// FSM.raiseLevel).
func (f *FSM) newQueueSource(t *Topic, deadlineHeader string, windows map[int32][]batch.Record) *queueSource {
	if windows == nil {
		windows = map[int32][]batch.Record{}
	}
	return &queueSource{t: t, deadlineHeader: deadlineHeader, windows: windows, decodes: f.decodes, strictDeadline: f.AppliedLevel() >= QueueLevel}
}

// record returns the record at (p, off), or nil if the offset holds none
// (below the log start, a control batch, or a gap).
func (s *queueSource) record(p int32, off int64) (*batch.Record, error) {
	if w := s.windows[p]; len(w) > 0 && off >= w[0].Offset && off <= w[len(w)-1].Offset {
		if r := findRecord(w, off); r != nil {
			return r, nil
		}
		return nil, nil
	}
	if p < 0 || int(p) >= len(s.t.Partitions) || s.t.Partitions[p] == nil {
		return nil, nil // another data group's partition holds nothing here
	}
	l := s.t.Partitions[p].log
	b, err := l.Read(off, queueReadBytes)
	if err != nil {
		var oor *log.OutOfRangeError
		if errors.As(err, &oor) {
			return nil, nil
		}
		return nil, fmt.Errorf("read %s-%d@%d for a claim: %w", s.t.Name, p, off, err)
	}
	// Each batch's records are decoded into a slice of their own; the
	// window is that slice when the read holds one batch, else one slice
	// of the right size for all of them (no regrowing).
	var parts [][]batch.Record
	total := 0
	for pos := 0; pos < len(b); {
		if info, err := batch.Peek(b[pos:]); err == nil && !s.decodes(info.Compression()) {
			// Below CompressionLevel, snappy, lz4 and zstd records are
			// skipped, as builds before that level skip them: the same
			// on every replica whatever its build.
			pos += info.Length
			continue
		}
		bt, n, err := batch.Decode(b[pos:])
		if err != nil {
			return nil, fmt.Errorf("decode %s-%d@%d for a claim: %w", s.t.Name, p, off, err)
		}
		pos += n
		if bt.IsControl() || len(bt.Records) == 0 {
			continue
		}
		parts = append(parts, bt.Records)
		total += len(bt.Records)
	}
	var recs []batch.Record
	switch len(parts) {
	case 0:
	case 1:
		recs = parts[0]
	default:
		recs = make([]batch.Record, 0, total)
		for _, rs := range parts {
			recs = append(recs, rs...)
		}
	}
	s.windows[p] = recs
	return findRecord(recs, off), nil
}

func findRecord(recs []batch.Record, off int64) *batch.Record {
	if len(recs) == 0 {
		return nil
	}
	// Offsets are dense within batches, and usually across them: try the
	// offset's place first, then search in case of gaps.
	if i := off - recs[0].Offset; i >= 0 && i < int64(len(recs)) && recs[i].Offset == off {
		return &recs[i]
	}
	lo, hi := 0, len(recs)
	for lo < hi {
		m := (lo + hi) / 2
		if recs[m].Offset < off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(recs) && recs[lo].Offset == off {
		return &recs[lo]
	}
	return nil
}

// RecordInfo implements queue.RecordSource.
func (s *queueSource) RecordInfo(p int32, off int64) (queue.RecordInfo, error) {
	r, err := s.record(p, off)
	if err != nil || r == nil {
		return queue.RecordInfo{}, err
	}
	info := queue.RecordInfo{Exists: true, Timestamp: r.Timestamp * int64(time.Millisecond), Size: int(recordSize(*r))}
	for _, h := range r.Headers {
		if h.Key == s.deadlineHeader && s.deadlineHeader != queue.NoDeadlineHeader {
			var ok bool
			info.Deadline, ok = parseDeadline(h.Value)
			info.InvalidDeadline = !ok && s.strictDeadline
		}
	}
	return info, nil
}

// parseDeadline reads a business deadline: Unix milliseconds (positive,
// below 2^53) or an RFC 3339 time; ok is false for anything else. From
// QueueLevel an unreadable deadline dead-letters the record (reason
// invalid_deadline: a deadline nobody can check is a producer's bug, not a
// record to run at any time); before, it counted as none, as it still does
// on a replica below that level.
func parseDeadline(v []byte) (int64, bool) {
	s := string(v)
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms > 0 && ms < 1<<53 {
			return ms * int64(time.Millisecond), true
		}
		return 0, false
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UnixNano(), true
	}
	return 0, false
}
