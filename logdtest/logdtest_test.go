package logdtest_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/log/logtest"
	"github.com/logd-dev/logd/logdtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// rpc returns a Connect client of s.
func rpc(s *logdtest.Server) logdv1connect.LogServiceClient {
	return logdv1connect.NewLogServiceClient(http.DefaultClient, s.URL())
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func createTopic(t *testing.T, c logdv1connect.LogServiceClient, name string, config map[string]string) {
	t.Helper()
	if _, err := c.CreateTopic(testContext(t), connect.NewRequest(&logdv1.CreateTopicRequest{Name: name, Partitions: 1, Config: config})); err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

func produce(t *testing.T, c logdv1connect.LogServiceClient, topic string, values ...string) error {
	t.Helper()
	req := &logdv1.ProduceRequest{Topic: topic}
	for _, v := range values {
		req.Records = append(req.Records, &logdv1.Record{Value: []byte(v)})
	}
	_, err := c.Produce(testContext(t), connect.NewRequest(req))
	return err
}

func bounds(t *testing.T, c logdv1connect.LogServiceClient, topic string) (start, end int64) {
	t.Helper()
	resp, err := c.ListOffsets(testContext(t), connect.NewRequest(&logdv1.ListOffsetsRequest{Topic: topic}))
	if err != nil {
		t.Fatalf("list offsets of %s: %v", topic, err)
	}
	return resp.Msg.LogStartOffset, resp.Msg.EndOffset
}

func reasonOf(err error) logdv1.Reason {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return logdv1.Reason_REASON_UNSPECIFIED
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if info, ok := v.(*logdv1.ErrorInfo); ok {
				return info.Reason
			}
		}
	}
	return logdv1.Reason_REASON_UNSPECIFIED
}

// TestStartServesARealNode: the node leads, registers the HTTP address as
// its API address, and answers with the server's own errors.
func TestStartServesARealNode(t *testing.T) {
	s := logdtest.Start(t, logdtest.Options{})
	c := rpc(s)
	st, err := c.Status(testContext(t), connect.NewRequest(&logdv1.StatusRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if m := st.Msg; m.NodeId != "node-1" || m.State != "Leader" || !m.Ready || m.LeaderAddress != s.Addr() || len(m.Members) != 1 || m.Members[0].ApiAddress != s.Addr() {
		t.Fatalf("status %v", m)
	}
	createTopic(t, c, "t", nil)
	if err := produce(t, c, "t", "a", "b"); err != nil {
		t.Fatal(err)
	}
	if _, end := bounds(t, c, "t"); end != 2 {
		t.Fatalf("end offset %d, want 2", end)
	}
	if err := produce(t, c, "nope", "a"); reasonOf(err) != logdv1.Reason_REASON_UNKNOWN_TOPIC {
		t.Fatalf("produce to a missing topic: %v", err)
	}
}

// TestHooks: FailNext fails calls in order without effect and with the
// error's detail; Intercept may pass a call through or block until the
// caller hangs up; Calls counts every call.
func TestHooks(t *testing.T) {
	s := logdtest.Start(t, logdtest.Options{})
	c := rpc(s)
	createTopic(t, c, "t", nil)
	s.FailNext("Produce",
		logdtest.Error(connect.CodeUnavailable, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_NOT_LEADER, LeaderAddress: "10.0.0.2:7070"}, "not the leader"),
		logdtest.Error(connect.CodeResourceExhausted, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_OVERLOADED}, "overloaded"))
	var passed atomic.Bool
	s.Intercept("Produce", func(context.Context) error { passed.Store(true); return nil })
	for i, want := range []logdv1.Reason{logdv1.Reason_REASON_NOT_LEADER, logdv1.Reason_REASON_OVERLOADED, logdv1.Reason_REASON_UNSPECIFIED} {
		err := produce(t, c, "t", "v")
		if got := reasonOf(err); got != want {
			t.Fatalf("produce %d: %v (reason %v), want reason %v", i, err, got, want)
		}
		if i == 1 && connect.CodeOf(err) != connect.CodeResourceExhausted {
			t.Fatalf("produce %d: code %v", i, connect.CodeOf(err))
		}
		if i == 2 && err != nil {
			t.Fatal(err)
		}
	}
	if !passed.Load() {
		t.Fatal("the interceptor that passes did not run")
	}
	if _, end := bounds(t, c, "t"); end != 1 {
		t.Fatalf("end offset %d: the failed calls wrote, or the passed one did not", end)
	}
	if n := s.Calls("Produce"); n != 3 {
		t.Fatalf("Produce calls %d, want 3", n)
	}
	if n := s.Calls("Fetch"); n != 0 {
		t.Fatalf("Fetch calls %d, want 0", n)
	}

	// A blocked call ends when its caller gives up.
	blocked := make(chan error, 1)
	s.Intercept("ListTopics", func(ctx context.Context) error {
		<-ctx.Done()
		blocked <- ctx.Err()
		return ctx.Err()
	})
	short, cancel := context.WithTimeout(testContext(t), 50*time.Millisecond)
	defer cancel()
	if _, err := c.ListTopics(short, connect.NewRequest(&logdv1.ListTopicsRequest{})); connect.CodeOf(err) != connect.CodeDeadlineExceeded {
		t.Fatalf("blocked ListTopics: %v", err)
	}
	if err := <-blocked; err == nil {
		t.Fatal("the interceptor's context did not end")
	}
}

// clock is a clock the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestClockStampsCommands: a lease runs on Options.Now, not on the wall
// clock, and the server describes queues by the same clock.
func TestClockStampsCommands(t *testing.T) {
	clk := &clock{now: time.Now().Truncate(time.Second)}
	s := logdtest.Start(t, logdtest.Options{Now: clk.Now})
	c := rpc(s)
	ctx := testContext(t)
	createTopic(t, c, "jobs", nil)
	if err := produce(t, c, "jobs", "job"); err != nil {
		t.Fatal(err)
	}
	lease := int64(10_000)
	if _, err := c.CreateQueueGroup(ctx, connect.NewRequest(&logdv1.CreateQueueGroupRequest{Topic: "jobs", Group: "w",
		Config: &logdv1.QueueGroupConfig{LeaseMs: &lease}})); err != nil {
		t.Fatal(err)
	}
	claim, err := c.Claim(ctx, connect.NewRequest(&logdv1.ClaimRequest{Topic: "jobs", Group: "w", MaxRecords: 1}))
	if err != nil || len(claim.Msg.Records) != 1 {
		t.Fatalf("claim: %v, %v", claim, err)
	}
	if got, want := claim.Msg.Records[0].LeaseDeadlineMs, clk.Now().Add(10*time.Second).UnixMilli(); got != want {
		t.Fatalf("lease deadline %d, want %d (the clock's now plus the lease)", got, want)
	}
	describe := func() *logdv1.QueuePartitionState {
		t.Helper()
		d, err := c.DescribeQueueGroup(ctx, connect.NewRequest(&logdv1.DescribeQueueGroupRequest{Topic: "jobs", Group: "w"}))
		if err != nil {
			t.Fatal(err)
		}
		return d.Msg.Partitions[0]
	}
	if p := describe(); p.InFlight != 1 {
		t.Fatalf("before the lease ends: %v", p)
	}
	clk.Advance(11 * time.Second)
	if p := describe(); p.InFlight != 0 || p.Ready != 1 {
		t.Fatalf("after the lease ended on the clock: %v", p)
	}
	_, err = c.Ack(ctx, connect.NewRequest(&logdv1.AckRequest{Topic: "jobs", Group: "w", Tokens: []string{claim.Msg.Records[0].Token}}))
	if reasonOf(err) != logdv1.Reason_REASON_STALE_TOKEN {
		t.Fatalf("ack after the lease: %v, want a stale token", err)
	}
}

// TestClean trims by retention when the test asks, at segment bounds.
func TestClean(t *testing.T) {
	s := logdtest.Start(t, logdtest.Options{})
	c := rpc(s)
	ctx := testContext(t)
	createTopic(t, c, "t", map[string]string{"segment.bytes": "14", "retention.bytes": "1"})
	for _, vs := range [][]string{{"a", "b", "c"}, {"d", "e"}} {
		if err := produce(t, c, "t", vs...); err != nil {
			t.Fatal(err)
		}
	}
	if start, _ := bounds(t, c, "t"); start != 0 {
		t.Fatalf("log start %d before Clean: the cleaner ran on its own", start)
	}
	if err := s.Clean(ctx); err != nil {
		t.Fatal(err)
	}
	if start, end := bounds(t, c, "t"); start != 3 || end != 5 {
		t.Fatalf("bounds [%d, %d) after Clean, want [3, 5)", start, end)
	}
}

// TestCloseEndsLongPolls: Close does not wait for a fetch's long poll.
func TestCloseEndsLongPolls(t *testing.T) {
	s, err := logdtest.New(logdtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := rpc(s)
	createTopic(t, c, "t", nil)
	s.Intercept("Fetch", func(context.Context) error { return nil })
	done := make(chan error, 1)
	go func() {
		_, err := c.Fetch(context.Background(), connect.NewRequest(&logdv1.FetchRequest{Topic: "t", MaxWaitMs: 60_000}))
		done <- err
	}()
	for s.Calls("Fetch") == 0 {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("the long poll answered normally")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("Close took %v", el)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.Status(context.Background(), connect.NewRequest(&logdv1.StatusRequest{})); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("status after Close: %v", err)
	}
}

// TestMetric reads the server's counters by label.
func TestMetric(t *testing.T) {
	s := logdtest.Start(t, logdtest.Options{})
	c := rpc(s)
	createTopic(t, c, "t", nil)
	if err := produce(t, c, "t", "a", "b", "c"); err != nil {
		t.Fatal(err)
	}
	n, err := s.Metric("logd_records_total", "op", "produce")
	if err != nil || n != 3 {
		t.Fatalf("produced records %v, %v; want 3", n, err)
	}
	if _, err := s.Metric("logd_records_total", "op"); err == nil {
		t.Fatal("odd label pairs accepted")
	}
}

// TestDiskFault: with a fault file system under the partition logs, a
// write that fails inside the state machine is never acknowledged, the
// node stops serving, and Close reports the failure.
func TestDiskFault(t *testing.T) {
	fs := logtest.Wrap(log.OSFS{})
	s, err := logdtest.New(logdtest.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	c := rpc(s)
	createTopic(t, c, "t", nil)
	if err := produce(t, c, "t", "a"); err != nil {
		t.Fatal(err)
	}
	fs.FailNextWrite(syscall.ENOSPC, 0)
	if err := produce(t, c, "t", "b"); err == nil {
		t.Fatal("a produce whose write failed was acknowledged")
	}
	if err := produce(t, c, "t", "c"); err == nil {
		t.Fatal("a stopped node acknowledged a produce")
	}
	if err := s.Close(); err == nil || !strings.Contains(err.Error(), "node stopped") {
		t.Fatalf("Close after a disk fault: %v, want the node's failure", err)
	}
}
