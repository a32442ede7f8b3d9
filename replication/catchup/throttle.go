package catchup

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/logd-dev/logd/backend"
)

// The move budget: how fast a node copies the segment bytes of a replica
// it builds or catches up (install.go), so that a replica moved to it
// (balancing, a drain, a dead node's replicas rebuilt) or a follower
// installing a snapshot does not take the disk and the network from
// client traffic, as Kafka's leader.replication.throttled.rate,
// CockroachDB's kv.snapshot_rebalance.max_rate and Redpanda's
// raft_learner_recovery_rate do. It bounds the receiving side: what one
// node reads, whichever peers serve it (docs/operations.md, "Moving
// replicas").
//
// One Throttle per node, shared by every fetcher of the node: the meta
// group's and each data group's, so replicas built at once share the one
// budget. Only segment data read from peers is paced: not the Raft log's
// entries (AppendEntries), not the snapshot Raft sends (a manifest), not
// client reads, not backups and restores.

// DefaultMoveBytesPerSecond is the move budget when none is configured:
// the compaction budget's (cleaner.DefaultIOBytesPerSec) and CockroachDB's
// snapshot rate. One disk serves the copy and the Raft logs of every group
// the node holds, whose fsyncs each produce waits for; at this rate a
// rebuild of 100 GiB takes under an hour.
const DefaultMoveBytesPerSecond = 32 << 20

// maxThrottleBurst bounds the bytes one read may take from the budget at
// once, and so what an idle budget lets through before pacing starts;
// below it, the burst is one second of the rate.
const maxThrottleBurst = 256 << 10

// Throttle is a token bucket of bytes per second with its counters. It is
// safe for concurrent use; a nil *Throttle paces and counts nothing.
type Throttle struct {
	lim   *rate.Limiter // nil: counts, does not pace
	rate  int64         // bytes per second; 0: unbounded
	bytes atomic.Int64  // bytes read through the throttle
	wait  atomic.Int64  // nanoseconds readers spent waiting for the budget
}

// NewThrottle returns a Throttle of bytesPerSecond; one of 0 or less
// paces nothing but still counts the bytes read through it. It starts
// nothing.
func NewThrottle(bytesPerSecond int64) *Throttle {
	t := &Throttle{}
	if bytesPerSecond > 0 {
		t.rate = bytesPerSecond
		// golang.org/x/time/rate reserves tokens in arrival order and
		// gives back those of a wait cut short, so readers share the
		// budget and a cancelled one costs the others nothing.
		t.lim = rate.NewLimiter(rate.Limit(bytesPerSecond), int(min(bytesPerSecond, maxThrottleBurst)))
	}
	return t
}

// Stats returns what went through t: bytes, time spent waiting, and its
// rate.
func (t *Throttle) Stats() backend.CatchUpStats {
	if t == nil {
		return backend.CatchUpStats{}
	}
	return backend.CatchUpStats{Bytes: t.bytes.Load(), ThrottleWait: time.Duration(t.wait.Load()), BytesPerSecond: t.rate}
}

// waitClock is told when a read starts and ends a wait for the budget:
// the fetch's deadline, which stops while the fetch waits (install.go).
type waitClock interface {
	waitStart()
	waitEnd(waited time.Duration)
}

// reader returns r with its reads paced by t: a read asks r for at most
// the bucket's burst, and returns once the bucket has paid for what it
// read, so n bytes take at least (n - burst) / rate. While a read waits
// for the budget, ctx's end ends it with ctx's cause; the bytes it read
// are returned with that error. clock, if set, is told of each wait.
// Reads are counted in t's Stats. A nil t returns r.
func (t *Throttle) reader(ctx context.Context, r io.Reader, clock waitClock) io.Reader {
	if t == nil {
		return r
	}
	return &throttledReader{ctx: ctx, r: r, t: t, clock: clock}
}

type throttledReader struct {
	ctx   context.Context
	r     io.Reader
	t     *Throttle
	clock waitClock // may be nil
}

func (r *throttledReader) Read(p []byte) (int, error) {
	if r.t.lim != nil {
		if err := r.ctx.Err(); err != nil {
			return 0, fmt.Errorf("move budget: %w", context.Cause(r.ctx))
		}
		if b := r.t.lim.Burst(); len(p) > b {
			p = p[:b]
		}
	}
	n, err := r.r.Read(p)
	if n > 0 {
		r.t.bytes.Add(int64(n))
		if werr := r.t.pay(r.ctx, n, r.clock); werr != nil {
			return n, werr
		}
	}
	return n, err
}

// pay waits until the bucket holds n bytes, at most its burst.
func (t *Throttle) pay(ctx context.Context, n int, clock waitClock) error {
	if t.lim == nil {
		return nil
	}
	start := time.Now()
	res := t.lim.ReserveN(start, n)
	if !res.OK() {
		// Read never asks for more than the burst.
		return fmt.Errorf("move budget: %d bytes exceed the burst of %d", n, t.lim.Burst())
	}
	d := res.DelayFrom(start)
	if d == 0 {
		return nil
	}
	if clock != nil {
		clock.waitStart()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	var err error
	select {
	case <-timer.C:
	case <-ctx.Done():
		res.Cancel()
		err = fmt.Errorf("move budget: %w", context.Cause(ctx))
	}
	spent := time.Since(start)
	t.wait.Add(int64(spent))
	if clock != nil {
		clock.waitEnd(spent)
	}
	return err
}
