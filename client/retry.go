package client

import (
	"context"
	"math/rand/v2"
	"time"
)

// retryClass says after which failures a call may be repeated.
type retryClass int

const (
	// retryAny: the call has no side effects (reads, metadata reads), so
	// every retryable error (IsRetryable) may be retried.
	retryAny retryClass = iota
	// retryUnwritten: the call writes, so it is retried only after errors
	// that guarantee nothing was written (writeRetryable).
	retryUnwritten
)

func (rc retryClass) allows(err error) bool {
	if rc == retryUnwritten {
		return writeRetryable(err)
	}
	return IsRetryable(err)
}

// do runs fn with a per-attempt timeout and repeats it under the client's
// RetryPolicy while the failure allows it. It returns the last error.
func (c *Client) do(ctx context.Context, method string, rc retryClass, timeout time.Duration, fn func(context.Context) error) error {
	p := c.opts.Retry
	for attempt := 1; ; attempt++ {
		host := c.router.target()
		actx, cancel := context.WithTimeout(ctx, timeout)
		err := fn(actx)
		cancel()
		if err == nil {
			return nil
		}
		c.router.observe(host, err) // may move to another node (leader.go)
		if attempt >= p.MaxAttempts || ctx.Err() != nil || !rc.allows(err) {
			return err
		}
		delay := backoff(p, attempt, err)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < delay {
			return err // waiting would outlive the caller
		}
		if p.OnRetry != nil {
			p.OnRetry(RetryEvent{Method: method, Attempt: attempt, Delay: delay, Err: err})
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// backoff returns the delay after the given failed attempt (1-based):
// full jitter over a capped exponential, but at least the server's hint.
func backoff(p RetryPolicy, attempt int, err error) time.Duration {
	ceiling := p.MaxBackoff
	if shift := attempt - 1; shift < 30 {
		ceiling = min(p.MaxBackoff, p.InitialBackoff<<shift)
	}
	var d time.Duration
	if ceiling > 0 {
		d = time.Duration(rand.Int64N(int64(ceiling)))
	}
	if oe, ok := asOverloaded(err); ok && oe.RetryAfter > d {
		d = oe.RetryAfter
	}
	return d
}

// RetryEvent describes a retry about to happen, for RetryPolicy.OnRetry.
type RetryEvent struct {
	// Method is the RPC name, e.g. "Fetch".
	Method string
	// Attempt is the attempt that just failed (1 for the first).
	Attempt int
	// Delay is the wait before the next attempt.
	Delay time.Duration
	// Err is the failure of the attempt.
	Err error
}
