package queue

import (
	"math"
	"time"
)

// The drain rate: how fast a group finishes records (acks and dead
// letters), measured from the replicated counters at command times, so
// every replica answers the same. Admission control derives its
// retry-after from it (RetryAfter).

// Drain-rate sampling: a sample of the cumulative finished counts is taken
// by the first command at least drainBucket after the last one, and
// drainSamples are kept, so the rate spans at least DrainWindow (or the
// group's whole life when younger) and memory is fixed.
const (
	drainBucket  = int64(time.Second)
	drainSamples = 16
	// DrainWindow is the recent window the drain rate is measured over.
	DrainWindow = 10 * time.Second
)

// Bounds of a retry-after hint.
const (
	// MinRetryAfter is the floor of a retry-after hint.
	MinRetryAfter = 100 * time.Millisecond
	// MaxRetryAfter is its ceiling.
	MaxRetryAfter = 30 * time.Second
	// IdleRetryAfter is the hint while nothing drained in the window:
	// no rate to divide by, so producers come back soon (with their
	// jitter) rather than wait out the ceiling for a pool that may
	// already be back.
	IdleRetryAfter = time.Second
)

// drainSample is the group's cumulative finished records and bytes at a
// command time (Unix ns).
type drainSample struct {
	At      int64 `json:"t"`
	Records int64 `json:"n"`
	Bytes   int64 `json:"b,omitempty"`
}

// finishedRecords is the group's cumulative count of finished records.
func (q *Group) finishedRecords() int64 {
	var n int64
	for _, p := range q.parts {
		n += p.Acked + p.DeadLettered
	}
	return n
}

// Tick takes a drain sample at now if the last one is at least a bucket
// old. Every command that touches the group calls it (claims, acks, nacks
// and extends do so themselves; the state machine calls it for applied
// appends and dead letters). A rate is measured up to the time asked
// (DrainRate), so it falls while nothing finishes, samples or not.
func (q *Group) Tick(now int64) {
	if n := len(q.drain); n > 0 && now < q.drain[n-1].At+drainBucket {
		return
	}
	s := drainSample{At: now, Records: q.finishedRecords(), Bytes: q.finishedBytes}
	if len(q.drain) < drainSamples {
		q.drain = append(q.drain, s)
		return
	}
	copy(q.drain, q.drain[1:])
	q.drain[len(q.drain)-1] = s
}

// DrainRate returns the records and bytes the group finished per second
// over the recent window ending at now: measured from the latest sample at
// least DrainWindow old (else the oldest) to the counts now. Bytes are
// counted once the group counts exact bytes. 0 when nothing is known.
func (q *Group) DrainRate(now int64) (records, bytes float64) {
	if len(q.drain) == 0 {
		return 0, 0
	}
	base := q.drain[0]
	for _, s := range q.drain {
		if s.At <= now-int64(DrainWindow) {
			base = s
		}
	}
	secs := float64(now-base.At) / float64(time.Second)
	if secs <= 0 {
		return 0, 0
	}
	return float64(max(q.finishedRecords()-base.Records, 0)) / secs, float64(max(q.finishedBytes-base.Bytes, 0)) / secs
}

// RetryAfter is the hint for a producer refused by a bound exceeded by
// excess (records, bytes or records to age out, in the unit of rate): the
// time the group needs at rate (per second) to drain it, within
// [MinRetryAfter, MaxRetryAfter], and IdleRetryAfter while nothing drains.
func RetryAfter(excess, rate float64) time.Duration {
	if rate <= 0 || math.IsNaN(rate) {
		return IdleRetryAfter
	}
	secs := max(excess, 0) / rate
	if secs >= MaxRetryAfter.Seconds() {
		return MaxRetryAfter
	}
	return max(time.Duration(secs*float64(time.Second)), MinRetryAfter)
}
