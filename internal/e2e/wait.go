package e2e

import (
	"context"
	"testing"
	"time"
)

// WaitProgress is how often WaitFor logs that it still waits.
const WaitProgress = 10 * time.Second

// WaitFor calls cond every 10 ms until it holds, failing the test when ctx
// ends first. Polling real processes, there is no event to wait on. Every
// WaitProgress it logs the test and what it waits for, so a wait that
// hangs under load is found in the test's log.
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
				t.Logf("%s: still waiting for %s (%s elapsed)", t.Name(), what, now.Sub(start).Round(time.Second))
				next = now.Add(WaitProgress)
			}
		}
	}
}
