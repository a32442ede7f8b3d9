package server_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/internal/quota"
	"github.com/logd-dev/logd/server"
)

// fakeClock is a clock a test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestQuotas: a principal past its produce or fetch byte rate is refused
// with OVERLOADED and the time its bucket needs; others are not; the
// refusals and bytes show in the metrics.
func TestQuotas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clock := &fakeClock{t: time.Now()}
	e := newAuthEnv(t, ctx, envConfig{mod: func(o *server.Options) {
		o.Auth.Quotas = quota.Rates{ProduceBytesPerSec: 1000, FetchBytesPerSec: 2000}
		o.Auth.Now = clock.Now
	}})
	rw := func(p string) []auth.ACL {
		return []auth.ACL{allow(p, auth.ResourceTopic, auth.PatternLiteral, "t", auth.OpWrite), allow(p, auth.ResourceTopic, auth.PatternLiteral, "t", auth.OpRead)}
	}
	alice := e.client(e.user(ctx, "alice", rw("User:alice")...))
	bob := e.client(e.user(ctx, "bob", rw("User:bob")...))
	if _, err := e.client(e.admin).CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "t", Partitions: 1})); err != nil {
		t.Fatal(err)
	}
	produce := func(c interface {
		Produce(context.Context, *connect.Request[logdv1.ProduceRequest]) (*connect.Response[logdv1.ProduceResponse], error)
	}, n int) error {
		_, err := c.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "t", Records: []*logdv1.Record{{Key: []byte("k"), Value: []byte(strings.Repeat("v", n-1))}}}))
		return err
	}
	overloaded := func(err error, retryMs int64) bool {
		info := errorInfo(err)
		return connect.CodeOf(err) == connect.CodeResourceExhausted && info.GetReason() == logdv1.Reason_REASON_OVERLOADED && info.GetRetryAfterMs() == retryMs
	}

	// 1000 bytes/s, a second's burst: 1500 bytes pass and leave a debt
	// of 500 bytes, half a second.
	if err := produce(alice, 1500); err != nil {
		t.Fatal(err)
	}
	if err := produce(alice, 1); !overloaded(err, 500) {
		t.Errorf("past the produce quota: %v (%v), want OVERLOADED after 500 ms", err, errorInfo(err))
	}
	if err := produce(bob, 10); err != nil {
		t.Errorf("another principal: %v", err)
	}
	clock.Add(400 * time.Millisecond)
	if err := produce(alice, 1); !overloaded(err, 100) {
		t.Errorf("100 ms short: %v (%v), want OVERLOADED after 100 ms", err, errorInfo(err))
	}
	clock.Add(100 * time.Millisecond)
	if err := produce(alice, 1); err != nil {
		t.Errorf("once paid back: %v", err)
	}

	// Fetch: 2000 bytes/s; the first fetch serves 1511 bytes (every
	// record so far), the second 1511 more, the third is refused.
	for i := range 2 {
		if _, err := alice.Fetch(ctx, connect.NewRequest(&logdv1.FetchRequest{Topic: "t"})); err != nil {
			t.Fatalf("fetch %d: %v", i, err)
		}
	}
	if _, err := alice.Fetch(ctx, connect.NewRequest(&logdv1.FetchRequest{Topic: "t"})); !overloaded(err, 511) {
		t.Errorf("past the fetch quota: %v (%v), want OVERLOADED after 511 ms", err, errorInfo(err))
	}

	for _, want := range []string{
		`logd_principal_quota_throttled_total{direction="produce",principal="User:alice"} 2`,
		`logd_principal_quota_throttled_total{direction="fetch",principal="User:alice"} 1`,
		`logd_principal_quota_bytes_total{direction="produce",principal="User:alice"} 1501`,
		`logd_principal_quota_bytes_total{direction="produce",principal="User:bob"} 10`,
		`logd_principal_quota_bytes_total{direction="fetch",principal="User:alice"} 3022`,
	} {
		if m := e.metrics(); !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// metrics scrapes /metrics as the bootstrap admin.
func (e *authEnv) metrics() string {
	e.t.Helper()
	code, body := e.get("/metrics", e.admin)
	if code != http.StatusOK {
		e.t.Fatalf("/metrics: %d %s", code, body)
	}
	return body
}
