package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// ErrRetryBudgetExhausted is wrapped, together with the last error, by the
// error of a call that could have been retried but was not, because the
// client's RetryBudget was empty:
// the dependency has been failing for many callers at once, and more
// retries would only add to its load.
var ErrRetryBudgetExhausted = errors.New("logd: retry budget exhausted")

// Clock is the time source of a Retrier. The zero Retrier uses the wall
// clock; tests inject a fake one to check backoffs and deadlines without
// waiting.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep waits for d or until ctx ends, and returns ctx.Err() in the
	// latter case.
	Sleep(ctx context.Context, d time.Duration) error
}

// wallClock is the real Clock.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Defaults of a RetryBudget.
const (
	// DefaultBudgetTokens is the bucket's capacity: the burst of retries a
	// healthy client may spend at once.
	DefaultBudgetTokens = 50
	// DefaultBudgetRatio is the tokens one successful call earns: 0.1 lets
	// retries add at most about 10% to the load of a steady workload.
	DefaultBudgetRatio = 0.1
	// DefaultBudgetPerSecond is the tokens earned per second regardless of
	// successes, so a client that makes few calls can still retry at all.
	DefaultBudgetPerSecond = 5
)

// RetryBudget is a token bucket shared by every caller of one Client: each
// retry takes a token, each successful call earns Ratio tokens, and
// PerSecond tokens trickle in with time, up to Tokens. When a dependency
// fails for everyone, successes stop, the bucket drains, and callers stop
// retrying instead of multiplying the load on it (Finagle's retry budget).
// It is safe for concurrent use.
type RetryBudget struct {
	mu        sync.Mutex
	clock     Clock
	capacity  float64
	ratio     float64
	perSecond float64
	// Guarded by mu:
	tokens float64
	last   time.Time // last time-based refill
}

// NewRetryBudget returns a full bucket of capacity tokens that earns ratio
// tokens per success and perSecond tokens per second of the clock (nil
// means the wall clock). Zero or negative values mean the defaults
// (DefaultBudgetTokens, DefaultBudgetRatio, DefaultBudgetPerSecond).
func NewRetryBudget(capacity int, ratio, perSecond float64, clock Clock) *RetryBudget {
	if capacity <= 0 {
		capacity = DefaultBudgetTokens
	}
	if ratio <= 0 {
		ratio = DefaultBudgetRatio
	}
	if perSecond < 0 {
		perSecond = 0
	} else if perSecond == 0 {
		perSecond = DefaultBudgetPerSecond
	}
	if clock == nil {
		clock = wallClock{}
	}
	return &RetryBudget{clock: clock, capacity: float64(capacity), ratio: ratio, perSecond: perSecond,
		tokens: float64(capacity), last: clock.Now()}
}

// refill adds the time-based tokens. Call with mu held.
func (b *RetryBudget) refill() {
	now := b.clock.Now()
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(b.capacity, b.tokens+el.Seconds()*b.perSecond)
		b.last = now
	}
}

// withdraw takes one token for a retry and reports whether there was one.
func (b *RetryBudget) withdraw() bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// deposit credits a successful call.
func (b *RetryBudget) deposit() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens = min(b.capacity, b.tokens+b.ratio)
}

// Tokens returns the retries the budget allows now.
func (b *RetryBudget) Tokens() float64 {
	if b == nil {
		return float64(int(^uint(0) >> 1))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	return b.tokens
}

// Retrier runs an operation under a RetryPolicy. Every Client call goes
// through one (with the client's shared Policy.Budget); it is usable on its own
// for any operation:
//
//	r := client.Retrier{Policy: client.RetryPolicy{MaxAttempts: 5, Budget: c.RetryBudget()}}
//	err := r.Do(ctx, func(ctx context.Context) error { return callSomething(ctx) })
//
// An attempt is repeated only when Retryable says its error may succeed
// later, the attempt cap is not reached, the budget has a token, and the
// backoff ends before both the deadline and the end of the retry window
// (MaxRetryTime from the first attempt; for a refusal for overload,
// MaxOverloadWait when it is set, and never with FailOverloaded). A nil
// Policy.Budget is unlimited.
// The deadline is the earlier of the context's and Policy.Deadline from the
// first attempt; each attempt's timeout (AttemptTimeout) is clipped to what
// remains of it. The delay before attempt n+1 is drawn uniformly from
// [c/2, c), c = min(MaxBackoff, InitialBackoff*2^(n-1)) ("equal jitter"),
// but is at least the server's retry-after hint (OverloadedError.RetryAfter)
// plus a jitter drawn uniformly from [0, hint/2), so that producers refused
// together spread out.
// A Retrier is a value: copy it freely; it is safe for concurrent use if
// its Budget is.
type Retrier struct {
	// Name names the operation in RetryEvents.
	Name string
	// Policy bounds the attempts and backoffs; zero fields take the
	// defaults of Options.
	Policy RetryPolicy
	// Retryable reports whether a failed attempt may be repeated. nil means
	// IsRetryable.
	Retryable func(error) bool
	// Ambiguous reports whether a failed attempt may nonetheless have
	// taken effect (a write whose reply was lost). Once one has, the
	// operation's error is an *OutcomeUnknownError (ErrOutcomeUnknown)
	// whatever later attempts answer, unless one of them succeeds. nil
	// means no failure is ambiguous (reads).
	Ambiguous func(error) bool
	// AttemptTimeout bounds each attempt; 0 means no bound of its own (the
	// deadline still applies).
	AttemptTimeout time.Duration
	// Clock is the time source; nil means the wall clock.
	Clock Clock
	// Rand returns a uniform value in [0, n) for the jitter; nil means
	// math/rand/v2.Int64N.
	Rand func(n int64) int64
}

// Do runs fn until it succeeds or may not be repeated, and returns the last
// error (nil on success), as an *OutcomeUnknownError if an attempt's
// outcome was ambiguous (Ambiguous). When the deadline has passed before
// the first attempt, fn is not called and Do returns
// context.DeadlineExceeded. When the budget refuses a retry, the error also
// matches ErrRetryBudgetExhausted.
func (r Retrier) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	p := r.Policy.withDefaults()
	clock := r.Clock
	if clock == nil {
		clock = wallClock{}
	}
	retryable := r.Retryable
	if retryable == nil {
		retryable = IsRetryable
	}
	start := clock.Now()
	// The context's deadline is on the wall clock; carry what remains of it
	// to the retrier's clock so both deadlines compare on one clock.
	deadline, hasDeadline := ctx.Deadline()
	if hasDeadline {
		deadline = start.Add(time.Until(deadline))
	}
	if p.Deadline > 0 {
		if d := start.Add(p.Deadline); !hasDeadline || d.Before(deadline) {
			deadline, hasDeadline = d, true
		}
	}
	// The retry window bounds when a retry may start, not how long an
	// attempt may take (a long poll may outlast it). Refusals for
	// overload may have a window of their own (MaxOverloadWait).
	window := start.Add(p.MaxRetryTime)
	overloadWindow := start.Add(p.MaxOverloadWait)
	var (
		err     error
		unknown *OutcomeUnknownError // set by the first ambiguous attempt
		made    int                  // attempts made
		counted int                  // attempts that count toward MaxAttempts
	)
	// fail returns the call's error: the last one, kept ambiguous once an
	// attempt's outcome was unknown.
	fail := func(err error) error {
		if unknown == nil {
			return err
		}
		unknown.Attempts, unknown.Err = made, err
		return unknown
	}
	for attempt := 1; ; attempt++ {
		if cerr := ctx.Err(); cerr != nil {
			if err == nil {
				err = cerr
			}
			return fail(err)
		}
		timeout := r.AttemptTimeout
		if hasDeadline {
			left := deadline.Sub(clock.Now())
			if left <= 0 {
				if err == nil {
					err = context.DeadlineExceeded
				}
				return fail(err)
			}
			if timeout <= 0 || left < timeout {
				timeout = left
			}
		}
		made++
		err = r.attempt(ctx, timeout, fn)
		if err == nil {
			p.Budget.deposit()
			return nil
		}
		if unknown == nil && r.Ambiguous != nil && r.Ambiguous(err) {
			unknown = &OutcomeUnknownError{Attempt: attempt, Cause: err}
		}
		overloaded := errors.Is(err, ErrOverloaded)
		if overloaded && p.FailOverloaded {
			return fail(err)
		}
		// An overload refusal with bounds of its own waits within them.
		ownBounds := overloaded && p.MaxOverloadWait > 0
		if !ownBounds {
			counted++
		}
		if counted >= p.MaxAttempts || ctx.Err() != nil || !retryable(err) {
			return fail(err)
		}
		delay := r.backoff(p, attempt, err)
		now := clock.Now()
		wake := now.Add(delay)
		last := window
		if ownBounds {
			last = overloadWindow
		}
		if hasDeadline && !wake.Before(deadline) || wake.After(last) {
			return fail(err) // the wait would outlive the deadline or the window: fail now, not later
		}
		if !p.Budget.withdraw() {
			return fail(fmt.Errorf("%w (%w)", err, ErrRetryBudgetExhausted))
		}
		if p.OnRetry != nil {
			p.OnRetry(RetryEvent{Method: r.Name, Attempt: attempt, Delay: delay, Elapsed: now.Sub(start), Err: err})
		}
		if clock.Sleep(ctx, delay) != nil {
			return fail(err)
		}
	}
}

// attempt runs fn once under a timeout (0: none).
func (r Retrier) attempt(ctx context.Context, timeout time.Duration, fn func(context.Context) error) error {
	if timeout <= 0 {
		return fn(ctx)
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return fn(actx)
}

// backoff returns the delay after the given failed attempt (1-based):
// equal jitter over a capped exponential, but at least the server's hint.
// Half of each delay is fixed so that the attempt cap cannot run out
// before the retry window whatever the draws: DefaultMaxAttempts of the
// default delays cover DefaultMaxRetryTime, and so an election.
func (r Retrier) backoff(p RetryPolicy, attempt int, err error) time.Duration {
	ceiling := p.MaxBackoff
	if shift := attempt - 1; shift < 30 {
		ceiling = min(p.MaxBackoff, p.InitialBackoff<<shift)
	}
	d := ceiling / 2
	if span := ceiling - d; span > 0 {
		if r.Rand != nil {
			d += time.Duration(r.Rand(int64(span)))
		} else {
			d += time.Duration(rand.Int64N(int64(span)))
		}
	}
	if oe, ok := asOverloaded(err); ok && oe.RetryAfter > 0 {
		// Producers refused together get the same hint: each adds up to
		// half of it again, so they do not come back in one wave.
		after := oe.RetryAfter
		if span := int64(after / 2); span > 0 {
			if r.Rand != nil {
				after += time.Duration(r.Rand(span))
			} else {
				after += time.Duration(rand.Int64N(span))
			}
		}
		d = max(d, after)
	}
	return d
}

// String describes the retrier's policy, for logs.
func (r Retrier) String() string {
	p := r.Policy.withDefaults()
	return fmt.Sprintf("retry %q: %d attempts within %v, backoff %v..%v, deadline %v", r.Name, p.MaxAttempts, p.MaxRetryTime, p.InitialBackoff, p.MaxBackoff, p.Deadline)
}

// withDefaults returns p with zero fields replaced by the defaults of
// Options (the Budget is left alone: nil means unlimited here).
func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.InitialBackoff == 0 {
		p.InitialBackoff = DefaultInitialBackoff
	}
	if p.MaxBackoff == 0 {
		p.MaxBackoff = max(DefaultMaxBackoff, p.InitialBackoff)
	}
	if p.MaxRetryTime == 0 {
		p.MaxRetryTime = DefaultMaxRetryTime
	}
	return p
}
