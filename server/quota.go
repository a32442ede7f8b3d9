package server

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/internal/quota"
)

// Per-principal byte-rate quotas (docs/security.md, "Quotas"): the
// buckets are package internal/quota's, shared with the Kafka listener
// (Server.QuotaLimiter); this file applies them to Produce, Fetch,
// GroupFetch and Claim, and refuses a call whose principal's bucket is in
// debt with OVERLOADED and the time it takes to pay back. Bytes are a
// record's key, value and headers.

// quotas applies a node's byte-rate buckets (nil: unbounded).
type quotas struct {
	l *quota.Limiter
}

func newQuotas(q quota.Rates, now func() time.Time, reg *prometheus.Registry) *quotas {
	return &quotas{l: quota.New(q, now, reg)}
}

// QuotaLimiter returns the node's per-principal byte-rate buckets (nil
// without quotas), for the node's other front end to draw from the same
// ones.
func (s *Server) QuotaLimiter() *quota.Limiter { return s.quotas.l }

// admit refuses p's call while its bucket in direction d is in debt;
// otherwise it takes n bytes (0 when they are not known yet).
func (q *quotas) admit(d quota.Direction, p auth.Principal, n int64) error {
	after, ok := q.l.Admit(d, p, n)
	if ok {
		return nil
	}
	return withInfo(connect.CodeResourceExhausted,
		&logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_OVERLOADED, RetryAfterMs: max(after.Milliseconds(), 1)},
		fmt.Errorf("%s is over its %s quota of %.0f bytes/s; retry after %v", p, d, q.l.Rate(d), after.Round(time.Millisecond)))
}

// interceptor applies the quotas to Produce, Fetch, GroupFetch and Claim.
func (q *quotas) interceptor() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		if !q.l.Bounded(quota.Produce) && !q.l.Bounded(quota.Fetch) {
			return next
		}
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			switch req.Spec().Procedure {
			case logdv1connect.LogServiceProduceProcedure:
				if !q.l.Bounded(quota.Produce) {
					break
				}
				if err := q.admit(quota.Produce, authFrom(ctx).principal, producedBytes(req.Any().(*logdv1.ProduceRequest))); err != nil {
					return nil, err
				}
			case logdv1connect.LogServiceFetchProcedure, logdv1connect.LogServiceGroupFetchProcedure, logdv1connect.LogServiceClaimProcedure:
				if !q.l.Bounded(quota.Fetch) {
					break
				}
				p := authFrom(ctx).principal
				if err := q.admit(quota.Fetch, p, 0); err != nil {
					return nil, err
				}
				resp, err := next(ctx, req)
				if err == nil {
					q.l.Take(quota.Fetch, p, fetchedBytes(resp.Any()))
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
