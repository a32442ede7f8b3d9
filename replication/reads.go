package replication

import (
	"time"

	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/group"
)

// ReadResult is what Read returns: stored bytes and the partition's bounds
// after reading them.
type ReadResult struct {
	// Batches holds whole Kafka RecordBatch v2 batches exactly as stored,
	// starting with the one that holds the requested offset (which may
	// begin below it), each with a verified CRC. It is a copy the caller
	// owns: retention or compaction may delete the segments it came from
	// at once, and nothing needs releasing. Empty at the end of the log.
	Batches []byte
	// LogStartOffset and EndOffset are the partition's bounds: it holds
	// [LogStartOffset, EndOffset), the high watermark being EndOffset
	// (every applied record is committed).
	LogStartOffset, EndOffset int64
	// Changed is closed by the next append to the partition (or when the
	// partition is closed) after the read began: a long poll that found
	// no bytes waits on it, then reads again. Nothing is missed in between.
	Changed <-chan struct{}
}

// Read returns whole stored batches of a partition from offset, up to
// maxBytes in total but always at least one batch (so a batch larger than
// maxBytes is still served), without re-encoding anything.
//
// An offset outside [LogStartOffset, EndOffset] is an *OutOfRangeError
// (matching ErrOffsetOutOfRange) carrying the bounds; at EndOffset Batches
// is empty. Stored bytes that fail their checks are ErrCorrupt: the
// damaged range is never served.
func (b *Backend) Read(topic string, partition int32, offset int64, maxBytes int) (ReadResult, error) {
	p, err := b.FSM().Partition(topic, partition)
	if err != nil {
		return ReadResult{}, err
	}
	// Take the channel before reading, so an append in between wakes the
	// caller.
	changed := p.Changed()
	l := p.Log()
	data, err := l.Read(offset, maxBytes)
	if err != nil {
		return ReadResult{}, err
	}
	return ReadResult{Batches: data, LogStartOffset: l.StartOffset(), EndOffset: l.EndOffset(), Changed: changed}, nil
}

// Lag is a consumer group's position in one partition against its log.
type Lag struct {
	// Start and End are the log's bounds: it holds [Start, End).
	Start, End int64
	// Records not yet committed.
	Records int64
	// Seconds is the age of the oldest record not yet committed (by its
	// timestamp), 0 when none or unreadable.
	Seconds float64
}

// GroupLag computes a group's lag in a partition at a committed offset
// (the next offset to read, or -1 for none: then the oldest record is the
// first in the log), as of now.
func (b *Backend) GroupLag(topic string, partition int32, committed int64, now time.Time) (Lag, error) {
	p, err := b.FSM().Partition(topic, partition)
	if err != nil {
		return Lag{}, err
	}
	l := p.Log()
	lag := Lag{Start: l.StartOffset(), End: l.EndOffset()}
	lag.Records = group.LagRecords(committed, lag.Start, lag.End)
	if lag.Records == 0 {
		return lag, nil
	}
	from := max(committed, lag.Start)
	data, err := l.Read(from, 1)
	if err != nil || len(data) == 0 {
		return lag, nil
	}
	recs, err := batch.Records(data, from, 1)
	if err != nil || len(recs) == 0 {
		return lag, nil
	}
	if age := now.Sub(time.UnixMilli(recs[0].Timestamp)); age > 0 {
		lag.Seconds = age.Seconds()
	}
	return lag, nil
}
