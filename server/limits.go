package server

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Defaults of Limits. A request body is bounded before it is read whole,
// and the bodies of all requests together by a memory budget; see
// request_limits.go for how each bound is applied.
const (
	// DefaultInflightBytes is the default memory budget: request bytes
	// (as received, or as inflated when compressed) held by requests being
	// read or served at once. The heap a request holds is about three times
	// its body while it is decoded and turned into batches, so the default
	// keeps a node's request memory near 1 GiB at worst.
	DefaultInflightBytes = 256 << 20
	// DefaultBodyTimeout is the default time a client has to send a request
	// body, before the allowance DefaultBodyMinRate adds.
	DefaultBodyTimeout = 20 * time.Second
	// DefaultBodyMinRate is the default slowest body a client may send
	// (bytes per second): each byte received extends the body's deadline by
	// 1/DefaultBodyMinRate seconds, so a large body on a fair link is never
	// cut and a trickle is cut after about DefaultBodyTimeout.
	DefaultBodyMinRate = 64 << 10
	// DefaultWriteTimeout is the default time to answer one request: above
	// the longest long poll (MaxFetchWaitMs, MaxClaimWaitMs) plus the time
	// to send a large fetch, so a client that never reads its answer holds
	// it for a bounded time.
	DefaultWriteTimeout = 5 * time.Minute
	// smallRequestBytes is the size below which a request may use the last
	// eighth of the budget, which larger requests leave free: small calls
	// (heartbeats, acks, status) keep working while large bodies fill the
	// budget.
	smallRequestBytes = 64 << 10
	// chargeStep is how far ahead a body of unknown length is charged to
	// the budget as it is read.
	chargeStep = 64 << 10
)

// Limits bounds what one request, and all requests together, may cost a
// node. The zero value takes the defaults; a negative value switches a
// bound off.
type Limits struct {
	// MaxRequestBytes bounds one request body, on the wire and once
	// inflated: a larger one is refused (RECORD_TOO_LARGE) before it is
	// read whole, and a compressed one as soon as it inflates past it.
	// Default MaxRequestBytes.
	MaxRequestBytes int64
	// InflightBytes is the memory budget of the bodies of requests being
	// served (DefaultInflightBytes). A request that does not fit is refused
	// with OVERLOADED and a retry-after hint, unread when its length is
	// declared (Content-Length), as soon as it outgrows the budget
	// otherwise. A compressed gRPC message counts as MaxRequestBytes, the
	// most it may inflate to.
	InflightBytes int64
	// BodyTimeout and BodyMinRate bound the time to send a request body:
	// it must arrive within BodyTimeout plus one second per BodyMinRate
	// bytes received (DefaultBodyTimeout, DefaultBodyMinRate). Only the
	// body is timed: a long poll, whose body is small, waits as long as it
	// asked once its body is in.
	BodyTimeout time.Duration
	BodyMinRate int64
	// WriteTimeout bounds the time from a request's start to the end of
	// its answer (DefaultWriteTimeout). It must exceed the longest long
	// poll. The segment files peers fetch are exempt: they may be large.
	WriteTimeout time.Duration
	// InflightResponseBytes is the memory budget of answers being built
	// or sent, the API's and the Kafka listener's together
	// (DefaultInflightResponseBytes; answer_budget.go).
	InflightResponseBytes int64
	// ResponseWait is how long an answer waits for room in its budget
	// before it is refused with OVERLOADED (DefaultResponseWait).
	ResponseWait time.Duration
	// RetryAfter is the hint sent with OVERLOADED when the budget is full
	// (default backend.DefaultOverloadRetryAfter).
	RetryAfter time.Duration
}

// Validate reports a setting that cannot work.
func (l Limits) Validate() error {
	l = l.withDefaults()
	if l.WriteTimeout > 0 && l.WriteTimeout <= time.Duration(max(MaxFetchWaitMs, MaxClaimWaitMs))*time.Millisecond {
		return fmt.Errorf("write timeout %v must exceed the longest long poll (%d ms)", l.WriteTimeout, max(MaxFetchWaitMs, MaxClaimWaitMs))
	}
	if l.MaxRequestBytes > 0 && l.MaxRequestBytes > 1<<31-1 {
		return errors.New("max request bytes must fit 31 bits (a message's length in gRPC framing)")
	}
	if l.InflightBytes > 0 && l.MaxRequestBytes > 0 && l.InflightBytes-l.InflightBytes/8 < l.MaxRequestBytes {
		return fmt.Errorf("in-flight budget of %d bytes is too small for the request bound of %d: a request of the largest size may use seven eighths of the budget, and could never be served", l.InflightBytes, l.MaxRequestBytes)
	}
	if l.InflightResponseBytes > 0 && l.InflightResponseBytes < answerCost(DefaultFetchBytes) {
		return fmt.Errorf("in-flight response budget of %d bytes is too small: a fetch of the default %d bytes is charged %d", l.InflightResponseBytes, DefaultFetchBytes, answerCost(DefaultFetchBytes))
	}
	return nil
}

func (l Limits) withDefaults() Limits {
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.MaxRequestBytes, MaxRequestBytes)
	def(&l.InflightBytes, DefaultInflightBytes)
	def(&l.InflightResponseBytes, DefaultInflightResponseBytes)
	def(&l.BodyMinRate, DefaultBodyMinRate)
	defd(&l.BodyTimeout, DefaultBodyTimeout)
	defd(&l.WriteTimeout, DefaultWriteTimeout)
	defd(&l.ResponseWait, DefaultResponseWait)
	defd(&l.RetryAfter, defaultBudgetRetryAfter)
	return l
}

// budget is the memory budget of in-flight request bodies: a counter that
// refuses what would pass its limit, never waits. Requests larger than
// smallRequestBytes may fill it only up to seven eighths, so small calls
// still fit when large ones fill it.
type budget struct {
	limit int64 // <= 0: unbounded (still counted)

	mu       sync.Mutex
	inflight int64 // guarded by mu
}

// tryCharge adds n bytes to the budget for a request that will then hold
// total bytes, unless that would pass the limit (false: nothing charged).
func (b *budget) tryCharge(n, total int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.limit > 0 {
		limit := b.limit
		if total > smallRequestBytes {
			limit -= b.limit / 8
		}
		if b.inflight+n > limit {
			return false
		}
	}
	b.inflight += n
	return true
}

func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.inflight -= n
	b.mu.Unlock()
}

func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inflight
}
