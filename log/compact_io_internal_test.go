package log

import (
	"testing"
	"time"
)

// TestIOBudget paces with a fake clock: spending ahead of the rate sleeps
// exactly until the bytes are due; falling more than maxBudgetCredit behind
// restarts the window instead of banking a burst.
func TestIOBudget(t *testing.T) {
	now := time.Unix(1000, 0)
	var slept []time.Duration
	b := newIOBudget(1000, func() time.Time { return now }, func(d time.Duration) { slept = append(slept, d); now = now.Add(d) })
	steps := []struct {
		advance time.Duration // clock moves before the spend
		n       int
		want    time.Duration // sleep, 0 for none
	}{
		{n: 500, want: 500 * time.Millisecond},
		{n: 500, want: 500 * time.Millisecond},
		{advance: 200 * time.Millisecond, n: 100},                       // 100 ms behind: no sleep
		{n: 300, want: 200 * time.Millisecond},                          // caught up, then 200 ms ahead
		{advance: 5 * time.Second, n: 1000},                             // far behind: window restarts at now
		{n: 1000, want: 1000 * time.Millisecond},                        // the restarted window paces again
		{advance: 0, n: 0},                                              // nothing spent
		{advance: 100 * time.Millisecond, n: 50, want: 0 * time.Second}, // inside the window
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		slept = nil
		b.spend(s.n)
		var got time.Duration
		for _, d := range slept {
			got += d
		}
		if got != s.want {
			t.Fatalf("step %d: slept %v, want %v", i, got, s.want)
		}
	}
	if newIOBudget(0, nil, nil) != nil {
		t.Fatal("a zero rate must not pace")
	}
	var nilBudget *ioBudget
	nilBudget.spend(1 << 30) // no-op
}
