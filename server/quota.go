package server

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/auth"
)

// Per-principal byte-rate quotas (docs/security.md, "Quotas"). Each node
// keeps, per principal, one token bucket for the record bytes it
// produces and one for those it fetches, filled at the configured rate up
// to one second's worth. A call is admitted while its bucket is not in
// debt, and its bytes are taken after: a produce's as it is admitted, a
// fetch's (or claim's) once served, since only then are they known. A
// large call may so leave the bucket in debt; the principal's next calls
// are refused with OVERLOADED and a retry-after of the time the bucket
// takes to pay it back, so the rate holds on average, as Kafka's quotas
// throttle after the fact. Bytes are a record's key, value and headers.
//
// Buckets are per node (a client spread over three nodes may get three
// times the rate, as with Kafka's per-broker quotas) and per principal, so
// with --auth none every client shares the anonymous principal's.

// Quotas bound each principal's record bytes per second; 0 bounds nothing.
type Quotas struct {
	ProduceBytesPerSec int64
	FetchBytesPerSec   int64
}

// quotaDirection is one kind of traffic under a quota.
type quotaDirection struct {
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

// quotas are the produce and fetch directions; a nil direction is
// unbounded.
type quotas struct {
	produce, fetch *quotaDirection
}

func newQuotas(q Quotas, now func() time.Time, reg *prometheus.Registry) *quotas {
	if q.ProduceBytesPerSec <= 0 && q.FetchBytesPerSec <= 0 {
		return &quotas{}
	}
	throttled := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "logd_principal_quota_throttled_total", Help: "Calls refused by a principal's byte-rate quota, by principal and direction (produce, fetch).",
	}, []string{"principal", "direction"})
	bytes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "logd_principal_quota_bytes_total", Help: "Record bytes counted against a principal's byte-rate quota, by principal and direction.",
	}, []string{"principal", "direction"})
	reg.MustRegister(throttled, bytes)
	dir := func(name string, rate int64) *quotaDirection {
		if rate <= 0 {
			return nil
		}
		return &quotaDirection{name: name, rate: float64(rate), now: now, throttled: throttled, bytes: bytes, buckets: map[auth.Principal]*bucket{}}
	}
	return &quotas{produce: dir("produce", q.ProduceBytesPerSec), fetch: dir("fetch", q.FetchBytesPerSec)}
}

// bucketLocked returns p's bucket refilled to now; d.mu is held.
func (d *quotaDirection) bucketLocked(p auth.Principal) *bucket {
	now := d.now()
	b := d.buckets[p]
	if b == nil {
		b = &bucket{tokens: d.rate, last: now,
			throttled: d.throttled.WithLabelValues(p.String(), d.name), bytes: d.bytes.WithLabelValues(p.String(), d.name)}
		d.buckets[p] = b
		return b
	}
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = min(d.rate, b.tokens+el*d.rate)
		b.last = now
	}
	return b
}

// admit refuses p's call while its bucket is in debt; otherwise it takes
// n bytes (0 when they are not known yet).
func (d *quotaDirection) admit(p auth.Principal, n int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.bucketLocked(p)
	if b.tokens < 0 {
		b.throttled.Inc()
		after := time.Duration(math.Ceil(-b.tokens / d.rate * float64(time.Second)))
		return withInfo(connect.CodeResourceExhausted,
			&logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_OVERLOADED, RetryAfterMs: max(after.Milliseconds(), 1)},
			fmt.Errorf("%s is over its %s quota of %.0f bytes/s; retry after %v", p, d.name, d.rate, after.Round(time.Millisecond)))
	}
	b.tokens -= float64(n)
	b.bytes.Add(float64(n))
	return nil
}

// take takes n bytes served to p.
func (d *quotaDirection) take(p auth.Principal, n int64) {
	if n <= 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.bucketLocked(p)
	b.tokens -= float64(n)
	b.bytes.Add(float64(n))
}

// interceptor applies the quotas to Produce, Fetch, GroupFetch and Claim.
func (q *quotas) interceptor() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		if q.produce == nil && q.fetch == nil {
			return next
		}
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			switch req.Spec().Procedure {
			case logdv1connect.LogServiceProduceProcedure:
				if q.produce == nil {
					break
				}
				if err := q.produce.admit(authFrom(ctx).principal, producedBytes(req.Any().(*logdv1.ProduceRequest))); err != nil {
					return nil, err
				}
			case logdv1connect.LogServiceFetchProcedure, logdv1connect.LogServiceGroupFetchProcedure, logdv1connect.LogServiceClaimProcedure:
				if q.fetch == nil {
					break
				}
				p := authFrom(ctx).principal
				if err := q.fetch.admit(p, 0); err != nil {
					return nil, err
				}
				resp, err := next(ctx, req)
				if err == nil {
					q.fetch.take(p, fetchedBytes(resp.Any()))
				}
				return resp, err
			}
			return next(ctx, req)
		}
	}
}

// recordBytes is a record of the API: produced, fetched or claimed.
type recordBytes interface {
	GetKey() []byte
	GetValue() []byte
	GetHeaders() []*logdv1.Header
}

// sumBytes counts records' key, value and header bytes.
func sumBytes[R recordBytes](recs []R) int64 {
	var n int
	for _, r := range recs {
		n += len(r.GetKey()) + len(r.GetValue())
		for _, h := range r.GetHeaders() {
			n += len(h.GetKey()) + len(h.GetValue())
		}
	}
	return int64(n)
}

// producedBytes counts a produce request's record bytes.
func producedBytes(m *logdv1.ProduceRequest) int64 { return sumBytes(m.Records) }

// fetchedBytes counts the record bytes of a fetch, group fetch or claim
// response.
func fetchedBytes(resp any) int64 {
	switch m := resp.(type) {
	case *logdv1.FetchResponse:
		return sumBytes(m.Records)
	case *logdv1.GroupFetchResponse:
		return sumBytes(m.GetFetch().GetRecords())
	case *logdv1.ClaimResponse:
		return sumBytes(m.Records)
	}
	return 0
}
