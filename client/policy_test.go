package client_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
)

// fakeClock is a client.Clock whose time moves only when Sleep is called
// (or the test advances it), so backoffs and deadlines are checked without
// waiting.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return ctx.Err()
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sleeps)
}

// maxJitter makes the jitter draw its largest value, so delays are the
// capped exponential minus 1ns.
func maxJitter(n int64) int64 { return n - 1 }

// failing returns an operation that fails with errs in order, then
// succeeds, and counts its calls.
func failing(calls *int, errs ...error) func(context.Context) error {
	return func(context.Context) error {
		*calls++
		if *calls <= len(errs) {
			return errs[*calls-1]
		}
		return nil
	}
}

var errRetryable = client.ErrUnavailable

// overload100ms is a refusal for overload with a retry-after of 100ms.
var overload100ms = &client.OverloadedError{RetryAfter: 100 * time.Millisecond}

func TestRetrierPolicy(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name       string
		policy     client.RetryPolicy
		ctxTimeout time.Duration // 0: no context deadline; <0: already expired
		errs       []error
		wantCalls  int
		wantErr    error // nil: success
		wantSleeps []time.Duration
	}{
		{
			name:       "retried until success with capped exponential backoff",
			policy:     client.RetryPolicy{MaxAttempts: 5, InitialBackoff: 10 * ms, MaxBackoff: 25 * ms},
			errs:       []error{errRetryable, errRetryable, errRetryable},
			wantCalls:  4,
			wantSleeps: []time.Duration{10*ms - 1, 20*ms - 1, 25*ms - 1},
		},
		{
			name:      "permanent error not retried",
			policy:    client.RetryPolicy{MaxAttempts: 5},
			errs:      []error{client.ErrIdempotencyConflict},
			wantCalls: 1,
			wantErr:   client.ErrIdempotencyConflict,
		},
		{
			name:       "attempt cap",
			policy:     client.RetryPolicy{MaxAttempts: 3, InitialBackoff: ms, MaxBackoff: ms},
			errs:       []error{errRetryable, errRetryable, errRetryable, errRetryable},
			wantCalls:  3,
			wantErr:    client.ErrUnavailable,
			wantSleeps: []time.Duration{ms - 1, ms - 1},
		},
		{
			name:       "already expired deadline: no attempt",
			policy:     client.RetryPolicy{MaxAttempts: 3},
			wantCalls:  0,
			wantErr:    context.DeadlineExceeded,
			ctxTimeout: -1, // a context whose deadline has passed
		},
		{
			name: "backoff that would cross the deadline is not slept",
			// attempt 1 fails, delay 10ms-1 fits in 15ms; attempt 2 fails,
			// delay 20ms-1 would end after the deadline: return at once.
			policy:     client.RetryPolicy{MaxAttempts: 5, InitialBackoff: 10 * ms, MaxBackoff: time.Second, Deadline: 15 * ms},
			errs:       []error{errRetryable, errRetryable, errRetryable},
			wantCalls:  2,
			wantErr:    client.ErrUnavailable,
			wantSleeps: []time.Duration{10*ms - 1},
		},
		{
			name: "no retry starts after the retry window",
			// delays of 10ms-1: attempt 3 starts at about 20ms, a fourth
			// would start at about 30ms, past the 25ms window.
			policy:     client.RetryPolicy{MaxAttempts: 10, InitialBackoff: 10 * ms, MaxBackoff: 10 * ms, MaxRetryTime: 25 * ms},
			errs:       []error{errRetryable, errRetryable, errRetryable, errRetryable},
			wantCalls:  3,
			wantErr:    client.ErrUnavailable,
			wantSleeps: []time.Duration{10*ms - 1, 10*ms - 1},
		},
		{
			name: "retry-after honoured above the backoff cap, with jitter",
			// the hint plus the largest jitter, just under half of it
			policy:     client.RetryPolicy{MaxAttempts: 3, InitialBackoff: ms, MaxBackoff: 2 * ms},
			errs:       []error{&client.OverloadedError{RetryAfter: 300 * ms}},
			wantCalls:  2,
			wantSleeps: []time.Duration{450*ms - 1},
		},
		{
			name:      "retry-after beyond the deadline fails at once",
			policy:    client.RetryPolicy{MaxAttempts: 3, Deadline: 100 * ms},
			errs:      []error{&client.OverloadedError{RetryAfter: 300 * ms}},
			wantCalls: 1,
			wantErr:   client.ErrOverloaded,
		},
		{
			name: "overload refusals wait within MaxOverloadWait, past MaxAttempts and MaxRetryTime",
			// each wait is the hint plus the largest jitter: 150ms-1
			policy:     client.RetryPolicy{MaxAttempts: 2, InitialBackoff: ms, MaxBackoff: ms, MaxRetryTime: 5 * ms, MaxOverloadWait: time.Second},
			errs:       []error{overload100ms, overload100ms, overload100ms, overload100ms},
			wantCalls:  5,
			wantSleeps: []time.Duration{150*ms - 1, 150*ms - 1, 150*ms - 1, 150*ms - 1},
		},
		{
			name: "no overload retry starts after MaxOverloadWait",
			// retries start at about 150ms and 300ms; a third would start
			// at about 450ms, past the 400ms wait
			policy:     client.RetryPolicy{MaxOverloadWait: 400 * ms},
			errs:       []error{overload100ms, overload100ms, overload100ms, overload100ms},
			wantCalls:  3,
			wantErr:    client.ErrOverloaded,
			wantSleeps: []time.Duration{150*ms - 1, 150*ms - 1},
		},
		{
			name: "other failures keep MaxAttempts beside MaxOverloadWait",
			// the two overload refusals do not count; the second
			// unavailable is the second counted attempt
			policy:     client.RetryPolicy{MaxAttempts: 2, InitialBackoff: ms, MaxBackoff: ms, MaxOverloadWait: time.Second},
			errs:       []error{overload100ms, overload100ms, errRetryable, errRetryable, errRetryable},
			wantCalls:  4,
			wantErr:    client.ErrUnavailable,
			wantSleeps: []time.Duration{150*ms - 1, 150*ms - 1, ms - 1},
		},
		{
			name:      "FailOverloaded: the first refusal for overload ends the call",
			policy:    client.RetryPolicy{MaxAttempts: 5, FailOverloaded: true},
			errs:      []error{overload100ms, overload100ms},
			wantCalls: 1,
			wantErr:   client.ErrOverloaded,
		},
		{
			name:       "FailOverloaded: other failures are retried",
			policy:     client.RetryPolicy{MaxAttempts: 5, InitialBackoff: ms, MaxBackoff: ms, FailOverloaded: true},
			errs:       []error{errRetryable, overload100ms, errRetryable},
			wantCalls:  2,
			wantErr:    client.ErrOverloaded,
			wantSleeps: []time.Duration{ms - 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			ctx := t.Context()
			if tt.ctxTimeout < 0 {
				c, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
				defer cancel()
				ctx = c
			}
			var events []client.RetryEvent
			p := tt.policy
			p.OnRetry = func(e client.RetryEvent) { events = append(events, e) }
			r := client.Retrier{Name: "op", Policy: p, Clock: clock, Rand: maxJitter}
			calls := 0
			err := r.Do(ctx, failing(&calls, tt.errs...))
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("Do = %v, want %v", err, tt.wantErr)
			}
			if calls != tt.wantCalls {
				t.Errorf("calls = %d, want %d", calls, tt.wantCalls)
			}
			if got := clock.Sleeps(); !slices.Equal(got, tt.wantSleeps) {
				t.Errorf("sleeps = %v, want %v", got, tt.wantSleeps)
			}
			if len(events) != len(tt.wantSleeps) {
				t.Errorf("OnRetry called %d times, want %d", len(events), len(tt.wantSleeps))
			}
			// The clock moves only in Sleep: each event's Elapsed is the
			// sum of the waits before it.
			var elapsed time.Duration
			for i, e := range events {
				if e.Elapsed != elapsed {
					t.Errorf("retry event %d: Elapsed %v, want %v", i, e.Elapsed, elapsed)
				}
				elapsed += e.Delay
			}
		})
	}
}

// TestRetrierAttemptTimeoutClipped checks that each attempt's timeout is
// clipped to what remains of the deadline over all attempts.
func TestRetrierAttemptTimeoutClipped(t *testing.T) {
	clock := newFakeClock()
	r := client.Retrier{
		Policy:         client.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, Deadline: time.Hour, MaxRetryTime: 2 * time.Hour},
		AttemptTimeout: 24 * time.Hour,
		Clock:          clock,
		Rand:           maxJitter,
	}
	var lefts []time.Duration
	calls := 0
	err := r.Do(t.Context(), func(ctx context.Context) error {
		calls++
		dl, ok := ctx.Deadline()
		if !ok {
			t.Fatal("attempt has no deadline")
		}
		lefts = append(lefts, time.Until(dl))
		clock.Advance(40 * time.Minute) // the attempt takes 40 minutes
		return errRetryable
	})
	if !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("Do = %v", err)
	}
	// Attempt 1 gets the hour, attempt 2 the 20 minutes left (minus the
	// backoff); then nothing is left for a third.
	if calls != 2 {
		t.Fatalf("calls = %d, want 2", calls)
	}
	if lefts[0] > time.Hour || lefts[0] < 59*time.Minute {
		t.Errorf("attempt 1 timeout = %v, want about 1h (not the 24h attempt timeout)", lefts[0])
	}
	if lefts[1] > 20*time.Minute || lefts[1] < 19*time.Minute {
		t.Errorf("attempt 2 timeout = %v, want about 20m", lefts[1])
	}
}

// TestRetryBudgetExhaustedAcrossOperations: two operations share one
// budget; the first spends it, so the second gets no retry until successes
// (or time) refill it.
func TestRetryBudgetExhaustedAcrossOperations(t *testing.T) {
	clock := newFakeClock()
	budget := client.NewRetryBudget(3, 0.5, -1, clock) // no time-based refill
	p := client.RetryPolicy{MaxAttempts: 10, InitialBackoff: time.Millisecond, Budget: budget}
	r := client.Retrier{Policy: p, Clock: clock, Rand: maxJitter}

	// Operation A fails 5 times: it may retry only 3 times (the budget).
	callsA := 0
	err := r.Do(t.Context(), failing(&callsA, errRetryable, errRetryable, errRetryable, errRetryable, errRetryable))
	if !errors.Is(err, client.ErrRetryBudgetExhausted) || !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("A: Do = %v, want unavailable and budget exhausted", err)
	}
	if callsA != 4 {
		t.Fatalf("A: calls = %d, want 4 (1 + 3 retries)", callsA)
	}
	// Operation B, another caller of the same budget, is not retried at all.
	callsB := 0
	err = r.Do(t.Context(), failing(&callsB, errRetryable))
	if !errors.Is(err, client.ErrRetryBudgetExhausted) || callsB != 1 {
		t.Fatalf("B: Do = %v after %d calls, want budget exhausted after 1", err, callsB)
	}
	// Two successes earn one token: one retry again.
	for range 2 {
		n := 0
		if err := r.Do(t.Context(), failing(&n)); err != nil {
			t.Fatal(err)
		}
	}
	callsC := 0
	if err := r.Do(t.Context(), failing(&callsC, errRetryable)); err != nil || callsC != 2 {
		t.Fatalf("C: Do = %v after %d calls, want success after one retry", err, callsC)
	}
	// C's retry took the token, its success earned half of one.
	if got := budget.Tokens(); got != 0.5 {
		t.Fatalf("tokens = %v, want 0.5", got)
	}
}

// TestRetryBudgetRefillsWithTime: the time-based trickle lets a quiet
// client retry again after a while.
func TestRetryBudgetRefillsWithTime(t *testing.T) {
	clock := newFakeClock()
	budget := client.NewRetryBudget(2, 0.1, 1, clock) // 1 token per second
	r := client.Retrier{Policy: client.RetryPolicy{MaxAttempts: 10, InitialBackoff: time.Nanosecond, MaxBackoff: time.Nanosecond, Budget: budget}, Clock: clock, Rand: maxJitter}
	calls := 0
	_ = r.Do(t.Context(), failing(&calls, errRetryable, errRetryable, errRetryable, errRetryable))
	if calls != 3 {
		t.Fatalf("calls = %d, want 3", calls)
	}
	clock.Advance(1500 * time.Millisecond)
	if got := budget.Tokens(); got < 1.49 || got > 1.51 {
		t.Fatalf("tokens after 1.5s = %v, want 1.5", got)
	}
	clock.Advance(time.Hour)
	if got := budget.Tokens(); got != 2 {
		t.Fatalf("tokens after an hour = %v, want the capacity 2", got)
	}
}

// TestClientRetriesShareBudget: every call of one Client draws on one
// budget.
func TestClientRetriesShareBudget(t *testing.T) {
	budget := client.NewRetryBudget(1, 0.1, -1, nil)
	retry := fastRetry
	retry.Budget = budget
	c, srv := newTestClient(t, client.Options{Retry: retry})
	ctx := testContext(t)
	srv.FailNext("ListTopics", unavailable(), unavailable())
	if _, err := c.ListTopics(ctx); !errors.Is(err, client.ErrRetryBudgetExhausted) {
		t.Fatalf("ListTopics = %v, want budget exhausted after one retry", err)
	}
	if n := srv.Calls("ListTopics"); n != 2 {
		t.Fatalf("ListTopics calls = %d, want 2", n)
	}
	srv.FailNext("Status", unavailable())
	if _, err := c.Status(ctx); !errors.Is(err, client.ErrRetryBudgetExhausted) {
		t.Fatalf("Status = %v, want budget exhausted", err)
	}
	if c.RetryBudget() != budget {
		t.Fatal("RetryBudget is not the configured budget")
	}
}

// minJitter makes the jitter draw its smallest value.
func minJitter(int64) int64 { return 0 }

// TestDefaultPolicyRidesOutElection: an election keeps a cluster from
// taking writes for a few seconds (NOT_LEADER, UNAVAILABLE); the default
// policy keeps retrying through it, whatever the jitter draws, but never
// past the context's deadline, and with a bounded number of attempts.
func TestDefaultPolicyRidesOutElection(t *testing.T) {
	const election = 2500 * time.Millisecond
	const roundTrip = 2 * time.Millisecond
	tests := []struct {
		name       string
		rand       func(int64) int64
		ctxTimeout time.Duration // 0: none
		down       time.Duration // how long the cluster refuses
		wantOK     bool
	}{
		{name: "election, smallest delays", rand: minJitter, down: election, wantOK: true},
		{name: "election, largest delays", rand: maxJitter, down: election, wantOK: true},
		{name: "election, random delays", down: election, wantOK: true},
		{name: "the context's deadline comes first", rand: minJitter, down: election, ctxTimeout: time.Second},
		{name: "a cluster that never recovers", rand: minJitter, down: time.Hour},
		{name: "a cluster that never recovers, largest delays", rand: maxJitter, down: time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			start := clock.Now()
			ctx := t.Context()
			if tt.ctxTimeout > 0 {
				c, cancel := context.WithTimeout(ctx, tt.ctxTimeout)
				defer cancel()
				ctx = c
			}
			r := client.Retrier{Clock: clock, Rand: tt.rand} // the zero Policy: the defaults
			calls := 0
			err := r.Do(ctx, func(context.Context) error {
				calls++
				clock.Advance(roundTrip)
				if clock.Now().Sub(start) < tt.down {
					if calls%2 == 0 {
						return client.ErrUnavailable
					}
					return &client.NotLeaderError{}
				}
				return nil
			})
			elapsed := clock.Now().Sub(start)
			if tt.wantOK {
				if err != nil {
					t.Fatalf("Do = %v after %d attempts over %v, want success once the election is over", err, calls, elapsed)
				}
				return
			}
			if err == nil {
				t.Fatalf("Do succeeded after %d attempts over %v", calls, elapsed)
			}
			if tt.ctxTimeout > 0 && elapsed > tt.ctxTimeout {
				t.Errorf("retried for %v, past the context's deadline %v", elapsed, tt.ctxTimeout)
			}
			if tt.ctxTimeout == 0 && (elapsed < 5*time.Second || elapsed > 30*time.Second) {
				t.Errorf("gave up after %v, want several seconds and a bound", elapsed)
			}
			if calls > 100 {
				t.Errorf("%d attempts: not bounded", calls)
			}
			t.Logf("gave up after %d attempts over %v: %v", calls, elapsed, err)
		})
	}
}
