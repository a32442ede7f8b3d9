package client

import (
	"context"
	"time"
)

// retryClass says after which failures a call may be repeated, and
// whether a failure may leave its outcome unknown.
type retryClass int

const (
	// retryAny: the call has no side effects (reads, metadata reads, dry
	// runs), so every retryable error (IsRetryable) may be retried and no
	// failure leaves anything unknown.
	retryAny retryClass = iota
	// retryRepeatable: the call writes, but repeating it changes nothing
	// more (a produce whose records all carry idempotency keys, commits,
	// acks): retried on every retryable error, and after a failure that
	// may have written (mayHaveApplied), the call's error stays
	// ErrOutcomeUnknown unless a retry succeeds.
	retryRepeatable
	// retryUnwritten: the call writes, so it is retried only after errors
	// that guarantee nothing was written (writeRetryable); a failure that
	// may have written ends it with ErrOutcomeUnknown.
	retryUnwritten
)

func (rc retryClass) allows(err error) bool {
	if rc == retryUnwritten {
		return writeRetryable(err)
	}
	return IsRetryable(err)
}

// ambiguous is the Retrier's Ambiguous for the class: nil for reads.
func (rc retryClass) ambiguous() func(error) bool {
	if rc == retryAny {
		return nil
	}
	return mayHaveApplied
}

// do runs fn with a per-attempt timeout and repeats it under the client's
// RetryPolicy (a Retrier with the client's shared budget) while the failure
// allows it: rc keeps writes from being repeated after failures that may
// have written, and keeps such a failure in the call's error. Each attempt
// goes to the router's current node, and its failure may move the router
// to another (leader.go). It returns the last error, as an
// *OutcomeUnknownError once a write attempt's outcome was unknown.
func (c *Client) do(ctx context.Context, method string, rc retryClass, timeout time.Duration, fn func(context.Context) error) error {
	r := Retrier{Name: method, Policy: c.opts.Retry, Retryable: rc.allows, Ambiguous: rc.ambiguous(), AttemptTimeout: timeout}
	return r.Do(ctx, func(actx context.Context) error {
		host := c.router.target()
		err := fn(actx)
		if err != nil {
			c.router.observe(host, err)
		}
		return err
	})
}

// RetryBudget returns the budget shared by the client's calls, to share it
// with a standalone Retrier or to watch it.
func (c *Client) RetryBudget() *RetryBudget { return c.opts.Retry.Budget }

// RetryEvent describes a retry about to happen, for RetryPolicy.OnRetry.
type RetryEvent struct {
	// Method is the RPC name, e.g. "Fetch".
	Method string
	// Attempt is the attempt that just failed (1 for the first).
	Attempt int
	// Delay is the wait before the next attempt.
	Delay time.Duration
	// Elapsed is the time from the start of the call's first attempt to
	// now, the start of the wait: with Delay, how long the call will have
	// taken when the next attempt starts.
	Elapsed time.Duration
	// Err is the failure of the attempt.
	Err error
}
