package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"connectrpc.com/connect"
)

// WaitProgress is how often WaitFor logs that it still waits.
const WaitProgress = 10 * time.Second

// WaitFor calls cond every 10 ms until it holds, failing the test when ctx
// ends first. Polling real processes, there is no event to wait on. Every
// WaitProgress it writes the test and what it waits for to the test
// binary's standard error, not only to the test's log: go test prints a
// still-running test's log only with -v, while the binary's own output
// reaches CI's log when a package times out.
func WaitFor(t testing.TB, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	next := start.Add(WaitProgress)
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v after %s", what, ctx.Err(), time.Since(start).Round(time.Millisecond))
		case now := <-tick.C:
			if now.After(next) {
				fmt.Fprintf(os.Stderr, "e2e: %s: still waiting for %s (%s elapsed)\n", t.Name(), what, now.Sub(start).Round(time.Second))
				next = now.Add(WaitProgress)
			}
		}
	}
}

// Unapplied calls fn until it returns an error other than one that says
// the call was not applied (connect's Unavailable: not the leader, no
// leader yet, shutting down), and returns that error (nil: applied). A
// leader change under a loaded machine refuses a call now and then; the
// call is sent again, at most every 50 ms, until ctx ends.
func Unapplied(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		if connect.CodeOf(err) != connect.CodeUnavailable {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}
