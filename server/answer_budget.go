package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/internal/membudget"
)

// The answer budget (docs/architecture.md, "Memory budgets"): the bytes of
// answers being built or sent, the Connect API's and the Kafka listener's
// together (Server.AnswerBudget), apart from the request budget
// (request_limits.go). Apart, because the two bound different things: a
// full budget of produce bodies must not refuse the consumers that drain
// the backlog, nor a crowd of fetches refuse the producers; and an
// operator sizes each for its own traffic.
//
// A handler charges an answer before it builds it, for the most it may
// reach (answerCost of its max_bytes), trims the charge to what it built,
// and the charge is released when the answer has been written (wrap). An
// answer that does not fit waits up to Limits.ResponseWait, then is
// refused with OVERLOADED and a retry-after. One client (a principal; an
// anonymous one by its IP address) holds at most half the budget, so
// many streams of one client, over one HTTP/2 connection or many, cannot
// take it all.

const (
	// DefaultInflightResponseBytes is the default answer budget.
	DefaultInflightResponseBytes = 256 << 20
	// DefaultResponseWait is how long an answer waits for room in the
	// budget by default before it is refused.
	DefaultResponseWait = 500 * time.Millisecond
	// answerCopies is how many times its record bytes a Fetch answer
	// holds at its peak: the batches read from the log (the decoded
	// records point into them) and the encoded message.
	answerCopies = 2
)

// answerCost is what an answer of n record bytes is charged.
func answerCost(n int64) int64 { return n * answerCopies }

// answers is the server's side of the answer budget.
type answers struct {
	b          *membudget.Budget
	wait       time.Duration
	retryAfter time.Duration
}

func newAnswers(l Limits, reg prometheus.Registerer) *answers {
	limit := l.InflightResponseBytes
	a := &answers{b: membudget.New(limit, max(limit, 0)/2), wait: l.ResponseWait, retryAfter: l.RetryAfter}
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "logd_response_budget_refusals_total", Help: "Answers refused because the answer memory budget stayed full: OVERLOADED on the API, a throttled empty answer on Kafka.",
		}, func() float64 { return float64(a.b.Stats().Refused) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "logd_response_inflight_bytes", Help: "Answer bytes (API and Kafka) charged to the answer memory budget now.",
		}, func() float64 { return float64(a.b.Stats().InUse) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "logd_response_budget_bytes", Help: "The answer memory budget (0: unbounded).",
		}, func() float64 { return float64(a.b.Limit()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "logd_response_inflight_peak_bytes", Help: "The most answer bytes ever charged to the answer memory budget at once.",
		}, func() float64 { return float64(a.b.Stats().Peak) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "logd_response_budget_waits_total", Help: "Answers (API and Kafka) that waited for room in the answer memory budget.",
		}, func() float64 { return float64(a.b.Stats().Waited) }))
	return a
}

// maxAnswerBytes bounds the record bytes of one answer, so that its charge
// fits the budget (and one client's share of it); 0: unbounded.
func (a *answers) maxAnswerBytes() int64 {
	if mc := a.b.MaxCharge(); mc > 0 {
		return max(mc/answerCopies, 1)
	}
	return 0
}

// answerCharges holds a request's charges until its answer is written.
type answerCharges struct {
	mu      sync.Mutex
	charges []*membudget.Charge // guarded by mu
}

type answerChargesKey struct{}

// wrap releases, once next has written its answer, what the request's
// handler charged.
func (a *answers) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		held := &answerCharges{}
		defer func() {
			held.mu.Lock()
			defer held.mu.Unlock()
			for _, c := range held.charges {
				c.Release()
			}
		}()
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), answerChargesKey{}, held)))
	})
}

// chargeAnswer charges n bytes of answer for the call in ctx, waiting for
// room at most the budget's wait; OVERLOADED after. Outside wrap (a
// handler called directly) it charges nothing and returns nil, which
// Trim and Release accept.
func (s *Server) chargeAnswer(ctx context.Context, n int64) (*membudget.Charge, error) {
	held, ok := ctx.Value(answerChargesKey{}).(*answerCharges)
	if !ok {
		return nil, nil
	}
	c, err := s.answers.b.Acquire(ctx, answerKey(ctx), n, s.answers.wait)
	var full *membudget.FullError
	switch {
	case errors.As(err, &full):
		return nil, withInfo(connect.CodeResourceExhausted, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_OVERLOADED, RetryAfterMs: s.answers.retryAfter.Milliseconds()},
			fmt.Errorf("overloaded: %w; retry after %v", err, s.answers.retryAfter))
	case err != nil:
		return nil, toConnectError(err)
	}
	held.mu.Lock()
	held.charges = append(held.charges, c)
	held.mu.Unlock()
	return c, nil
}

// answerKey names who an answer is charged to: the principal, or for an
// anonymous call its IP address.
func answerKey(ctx context.Context) string {
	info := authFrom(ctx)
	if info.authenticated() {
		return membudget.PrincipalKey(info.principal.String())
	}
	return membudget.AddressKey(info.remote)
}

// AnswerBudget returns the node's answer memory budget, for the Kafka
// listener to draw from the same one.
func (s *Server) AnswerBudget() *membudget.Budget { return s.answers.b }
