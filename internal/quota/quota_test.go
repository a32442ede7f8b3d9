package quota

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/logd-dev/logd/auth"
)

// TestLimiter: a principal is admitted while its bucket is not in debt,
// whatever the size of the call; in debt it is refused for the time the
// debt takes to pay back, which Admit and Take also report as the
// throttle of the call that made the debt; other principals and the
// other direction are untouched; the clock pays the debt back.
func TestLimiter(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	reg := prometheus.NewRegistry()
	l := New(Rates{ProduceBytesPerSec: 1000, FetchBytesPerSec: 0}, func() time.Time { return now }, reg)
	alice, bob := auth.User("alice"), auth.User("bob")

	if d, ok := l.Admit(Produce, alice, 3000); !ok || d != 2*time.Second {
		t.Fatalf("first call: admitted %v, debt %v; want admitted, 2s", ok, d)
	}
	if d, ok := l.Admit(Produce, alice, 1); ok || d != 2*time.Second {
		t.Fatalf("in debt: admitted %v, retry after %v; want refused, 2s", ok, d)
	}
	if _, ok := l.Admit(Produce, bob, 10); !ok {
		t.Fatal("another principal was refused")
	}
	if _, ok := l.Admit(Fetch, alice, 1<<30); !ok || l.Bounded(Fetch) || l.Take(Fetch, alice, 1<<30) != 0 {
		t.Fatal("the unbounded direction bounded something")
	}
	now = now.Add(1500 * time.Millisecond)
	if d, ok := l.Admit(Produce, alice, 0); ok || d != 500*time.Millisecond {
		t.Fatalf("after 1.5s: admitted %v, retry after %v; want refused, 500ms", ok, d)
	}
	now = now.Add(500 * time.Millisecond)
	if d, ok := l.Admit(Produce, alice, 0); !ok || d != 0 {
		t.Fatalf("after 2s: admitted %v, debt %v; want admitted, none", ok, d)
	}
	if d := l.Take(Produce, alice, 1500); d != 1500*time.Millisecond { // the bucket was at 0
		t.Fatalf("take into debt: %v, want 1.5s", d)
	}
	if got := value(t, l.dirs[Produce].throttled.WithLabelValues("User:alice", "produce")); got != 2 {
		t.Errorf("throttled counter %v, want 2", got)
	}
	if got := value(t, l.dirs[Produce].bytes.WithLabelValues("User:alice", "produce")); got != 4500 {
		t.Errorf("bytes counter %v, want 4500", got)
	}

	var none *Limiter
	if _, ok := none.Admit(Produce, alice, 1<<40); !ok || none.Bounded(Produce) || none.Rate(Fetch) != 0 {
		t.Error("a nil Limiter bounded something")
	}
	if New(Rates{}, nil, nil) != nil {
		t.Error("New without rates is not nil")
	}
}

func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
