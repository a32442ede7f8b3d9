// Package quota holds the per-principal byte-rate quotas of a node
// (docs/security.md, "Quotas"), shared by its front ends: the Connect API
// and the Kafka listener draw from the same buckets, so a principal's
// rate on a node holds whichever door its bytes take.
//
// Each principal has one token bucket per direction (produce, fetch),
// filled at the configured rate up to one second's worth. A call is
// admitted while its bucket is not in debt, and its bytes are taken then
// (Admit) or once they are known (Take, for what a fetch served): a large
// call may leave the bucket in debt, and the principal's next calls are
// refused for the time the debt takes to pay back, so the rate holds on
// average, as Kafka's quotas throttle after the fact. What a refusal
// looks like is the front end's: OVERLOADED with a retry-after, or a
// Kafka throttle_time_ms.
//
// The clock is injected; the package never reads it itself.
package quota

import (
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logd-dev/logd/auth"
)

// Rates bound each principal's bytes per second; 0 bounds nothing.
type Rates struct {
	ProduceBytesPerSec int64
	FetchBytesPerSec   int64
}

// Direction is one kind of traffic under a quota.
type Direction int

// The directions.
const (
	Produce Direction = iota
	Fetch
)

func (d Direction) String() string {
	if d == Produce {
		return "produce"
	}
	return "fetch"
}

// Limiter is a node's buckets. A nil Limiter bounds nothing. Its methods
// are safe for concurrent use.
type Limiter struct {
	dirs [2]*direction // nil: unbounded
}

// direction is the buckets of one direction.
type direction struct {
	name string
	rate float64
	now  func() time.Time

	throttled *prometheus.CounterVec // by principal
	bytes     *prometheus.CounterVec // by principal

	mu      sync.Mutex
	buckets map[auth.Principal]*bucket // guarded by mu
}

// bucket is one principal's token bucket; guarded by its direction's mu.
type bucket struct {
	tokens    float64
	last      time.Time
	throttled prometheus.Counter
	bytes     prometheus.Counter
}

// New returns the buckets for rates, on the clock now (default
// time.Now), registering their metrics on reg (nil: none). Without a
// rate it returns nil, which bounds nothing.
func New(r Rates, now func() time.Time, reg prometheus.Registerer) *Limiter {
	if r.ProduceBytesPerSec <= 0 && r.FetchBytesPerSec <= 0 {
		return nil
	}
	if now == nil {
		now = time.Now
	}
	throttled := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "logd_principal_quota_throttled_total", Help: "Calls refused by a principal's byte-rate quota, by principal and direction (produce, fetch).",
	}, []string{"principal", "direction"})
	bytes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "logd_principal_quota_bytes_total", Help: "Record bytes counted against a principal's byte-rate quota, by principal and direction.",
	}, []string{"principal", "direction"})
	if reg != nil {
		reg.MustRegister(throttled, bytes)
	}
	l := &Limiter{}
	for d, rate := range [...]int64{Produce: r.ProduceBytesPerSec, Fetch: r.FetchBytesPerSec} {
		if rate > 0 {
			l.dirs[d] = &direction{name: Direction(d).String(), rate: float64(rate), now: now, throttled: throttled, bytes: bytes, buckets: map[auth.Principal]*bucket{}}
		}
	}
	return l
}

func (l *Limiter) dir(d Direction) *direction {
	if l == nil {
		return nil
	}
	return l.dirs[d]
}

// Bounded reports whether direction d has a quota.
func (l *Limiter) Bounded(d Direction) bool { return l.dir(d) != nil }

// Rate is direction d's bytes per second (0: unbounded).
func (l *Limiter) Rate(d Direction) float64 {
	if x := l.dir(d); x != nil {
		return x.rate
	}
	return 0
}

// Admit refuses p's call in direction d while p's bucket is in debt,
// returning the time the debt takes to pay back (at least a millisecond)
// and false. Otherwise it takes n bytes (0 when they are not known yet)
// and returns the time the bucket now needs to be out of debt (0 when it
// is not in debt) and true.
func (l *Limiter) Admit(d Direction, p auth.Principal, n int64) (time.Duration, bool) {
	x := l.dir(d)
	if x == nil {
		return 0, true
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	b := x.bucketLocked(p)
	if b.tokens < 0 {
		b.throttled.Inc()
		return max(x.debtLocked(b), time.Millisecond), false
	}
	x.takeLocked(b, n)
	return x.debtLocked(b), true
}

// Take takes n bytes served to p in direction d and returns the time the
// bucket now needs to be out of debt (0 when it is not).
func (l *Limiter) Take(d Direction, p auth.Principal, n int64) time.Duration {
	x := l.dir(d)
	if x == nil || n <= 0 {
		return 0
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	b := x.bucketLocked(p)
	x.takeLocked(b, n)
	return x.debtLocked(b)
}

// bucketLocked returns p's bucket refilled to now; x.mu is held.
func (x *direction) bucketLocked(p auth.Principal) *bucket {
	now := x.now()
	b := x.buckets[p]
	if b == nil {
		b = &bucket{tokens: x.rate, last: now,
			throttled: x.throttled.WithLabelValues(p.String(), x.name), bytes: x.bytes.WithLabelValues(p.String(), x.name)}
		x.buckets[p] = b
		return b
	}
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = min(x.rate, b.tokens+el*x.rate)
		b.last = now
	}
	return b
}

func (x *direction) takeLocked(b *bucket, n int64) {
	if n <= 0 {
		return
	}
	b.tokens -= float64(n)
	b.bytes.Add(float64(n))
}

// debtLocked is the time b takes to pay back its debt; 0 without one.
func (x *direction) debtLocked(b *bucket) time.Duration {
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(math.Ceil(-b.tokens / x.rate * float64(time.Second)))
}
