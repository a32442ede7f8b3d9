package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
)

// Backpressure and dead-letter operations against a real logd.

// noRetryClient fails at once, so the test sees each refusal.
func noRetryClient(t *testing.T, p *e2e.Node) *client.Client {
	t.Helper()
	c, err := client.New(p.Listen, client.Options{Timeout: 5 * time.Second, Retry: client.RetryPolicy{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// metric returns the sum of the samples of a metric whose line contains
// every label given (0 if none).
func metric(t *testing.T, p *e2e.Node, name string, labels ...string) (float64, bool) {
	t.Helper()
	resp, err := http.Get("http://" + p.Listen + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	found := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
lines:
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue lines
			}
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			sum += v
			found = true
		}
	}
	return sum, found
}

// TestOverloadBurst: a burst above the backlog bound is refused with the
// overloaded error and a retry-after hint while a worker drains the queue;
// producers that wait as told get every record in; nothing is lost or
// duplicated, and the worker handles each record once.
func TestOverloadBurst(t *testing.T) {
	// One group's bound: over data groups each group bounds its own
	// partitions' backlog (docs/architecture.md, "Data groups").
	p := e2e.StartNode(t, e2e.MetaGroupOnly()...)
	c := newQueueClient(t, p)
	raw := noRetryClient(t, p)
	ctx := context.Background()
	const bound, total = 20, 120
	if _, err := c.CreateTopic(ctx, "jobs", 2, map[string]string{"queue.max.backlog.records": strconv.Itoa(bound)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateQueueGroup(ctx, "jobs", "w", client.QueueGroupConfig{}, false); err != nil {
		t.Fatal(err)
	}
	rec := func(i int) []client.Record {
		return []client.Record{{Value: []byte(fmt.Sprintf("job-%03d", i)), IdempotencyKey: fmt.Sprintf("job-%03d", i)}}
	}
	for i := 0; i < bound; i++ {
		if _, err := raw.Produce(ctx, "jobs", rec(i)); err != nil {
			t.Fatalf("record %d within the bound: %v", i, err)
		}
	}
	// The first record past the bound: refused whole, retryable, with a hint.
	_, err := raw.Produce(ctx, "jobs", rec(bound))
	var oe *client.OverloadedError
	if !errors.As(err, &oe) || oe.RetryAfter <= 0 {
		t.Fatalf("produce past the bound: %v, want OverloadedError with retry-after", err)
	}
	resp, rerr := p.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "jobs", Records: []*logdv1.Record{{Value: []byte("x")}}}))
	var ce *connect.Error
	if !errors.As(rerr, &ce) || ce.Code() != connect.CodeResourceExhausted || e2e.ReasonOf(ce) != logdv1.Reason_REASON_OVERLOADED {
		t.Fatalf("raw produce past the bound: %v %v", resp, rerr)
	}
	// Producers wait as told while a slow worker drains.
	var refusals int
	produced := make(chan error, 1)
	go func() {
		for i := bound; i < total; i++ {
			for {
				_, err := raw.Produce(ctx, "jobs", rec(i))
				if errors.As(err, &oe) {
					refusals++
					time.Sleep(min(oe.RetryAfter, 200*time.Millisecond)) // the server's hint, capped for the test
					continue
				}
				if err != nil {
					produced <- fmt.Errorf("record %d: %w", i, err)
					return
				}
				break
			}
		}
		produced <- nil
	}()
	var mu sync.Mutex
	handled := map[string]int{}
	runWorker(t, c, client.WorkerOptions{Topic: "jobs", Group: "w", Concurrency: 2}, func(ctx context.Context, j *client.Job) error {
		time.Sleep(2 * time.Millisecond) // a slow downstream
		mu.Lock()
		handled[string(j.Value)]++
		mu.Unlock()
		return nil
	}, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) == total
	})
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if refusals == 0 {
		t.Error("no produce was refused during the burst")
	}
	// Every record exactly once in the topic and in the handler.
	seen := map[string]int{}
	for _, recs := range p.ReadAll(ctx, "jobs", 2) {
		for _, r := range recs {
			seen[string(r.Value)]++
		}
	}
	if len(seen) != total {
		t.Errorf("topic holds %d distinct records, want %d", len(seen), total)
	}
	for v, n := range seen {
		if n != 1 || handled[v] != 1 {
			t.Errorf("%s: %d times in the topic, handled %d times", v, n, handled[v])
		}
	}
	// After draining, produce succeeds at once.
	if _, err := raw.Produce(ctx, "jobs", rec(total)); err != nil {
		t.Fatalf("produce after draining: %v", err)
	}
	if n, _ := metric(t, p, "logd_queue_admission_refusals_total", `topic="jobs"`); n < float64(refusals) {
		t.Errorf("logd_queue_admission_refusals_total = %v, want >= %d", n, refusals)
	}
	t.Logf("%d records, bound %d: %d refusals while draining", total, bound, refusals)
}

// TestRedriveAfterFix: records dead-lettered during a downstream outage
// are listed by logctl, redriven by a server-side job that is stopped
// midway and a second job (no duplicate), and then acked once each with a fresh delivery
// count; a record that fails again and was redriven already is refused by
// the loop guard.
func TestRedriveAfterFix(t *testing.T) {
	p := e2e.StartNode(t)
	c := newQueueClient(t, p)
	ctx := context.Background()
	const n = 6
	if _, err := c.CreateTopic(ctx, "pay", 1, nil); err != nil {
		t.Fatal(err)
	}
	var recs []client.Record
	for i := 0; i < n; i++ {
		recs = append(recs, client.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("pay-%d", i)), IdempotencyKey: fmt.Sprintf("pay-%d", i)})
	}
	recs[n-1].Value = []byte("poison") // fails whatever the downstream does
	if _, err := c.Produce(ctx, "pay", recs); err != nil {
		t.Fatal(err)
	}
	cfg := client.QueueGroupConfig{MaxDeliveries: 2, BackoffBase: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond}
	if _, err := c.CreateQueueGroup(ctx, "pay", "billing", cfg, false); err != nil {
		t.Fatal(err)
	}
	finished := func(want int64) func() bool {
		return func() bool {
			d, err := c.DescribeQueueGroup(ctx, "pay", "billing")
			return err == nil && d.Partitions[0].Acked+d.Partitions[0].DeadLettered == want
		}
	}
	// The outage: every attempt fails transiently; all land in the DLQ.
	runWorker(t, c, client.WorkerOptions{Topic: "pay", Group: "billing"}, func(context.Context, *client.Job) error {
		return errors.New("downstream unavailable")
	}, finished(n))
	var listed []struct { // dlq list -o json: the fields checked
		Deliveries  int    `json:"deliveries"`
		LastError   string `json:"last_error"`
		OriginTopic string `json:"origin_topic"`
	}
	if err := json.Unmarshal([]byte(e2e.Logctl(t, p, "dlq", "list", "pay", "billing", "--reason", "max_deliveries", "--output", "json")), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed) != n || listed[0].Deliveries != 2 || listed[0].LastError != "downstream unavailable" || listed[0].OriginTopic != "pay" {
		t.Fatalf("dlq list: %+v", listed)
	}
	if out := e2e.Logctl(t, p, "dlq", "list", "pay", "billing", "--key", "k1"); !strings.Contains(out, "pay/0@1") || strings.Contains(out, "pay/0@2") {
		t.Fatalf("dlq list --key k1:\n%s", out)
	}
	if out := e2e.Logctl(t, p, "dlq", "redrive", "pay", "billing", "--dry-run"); !strings.Contains(out, fmt.Sprintf("%d would be redriven", n)) {
		t.Fatalf("dry run:\n%s", out)
	}
	if end := endOffset(t, c, "pay"); end != n {
		t.Fatalf("dry run wrote records: end %d", end)
	}
	// The fix is in. A slow redrive job is started and left to the
	// server (--detach)...
	var job struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(e2e.Logctl(t, p, "dlq", "redrive", "pay", "billing", "--rate", "4/s", "--detach", "-o", "json")), &job); err != nil || job.ID == "" {
		t.Fatalf("redrive --detach: %+v, %v", job, err)
	}
	e2e.WaitFor(t, ctx, "redriven records", func() bool { return endOffset(t, c, "pay") >= n+2 })
	// ...stopped after a few records...
	e2e.Logctl(t, p, "dlq", "redrive", "stop", job.ID)
	if err := json.Unmarshal([]byte(e2e.Logctl(t, p, "dlq", "redrive", "status", job.ID, "-o", "json")), &job); err != nil || job.State != "stopped" {
		t.Fatalf("status after stop: %+v, %v", job, err)
	}
	first := endOffset(t, c, "pay") - n
	// ...and a new job redrives them all: those the first one wrote are
	// answered as duplicates, not written again.
	out := e2e.Logctl(t, p, "dlq", "redrive", "pay", "billing", "--rate", "0", "--no-progress")
	if !strings.Contains(out, fmt.Sprintf("%d selected", n)) || !strings.Contains(out, fmt.Sprintf("%d already redriven by an earlier run", first)) {
		t.Fatalf("second redrive (the first wrote %d):\n%s", first, out)
	}
	if out := e2e.Logctl(t, p, "group", "list"); strings.Contains(out, "logd-redrive.") {
		t.Fatalf("group list shows redrive positions:\n%s", out)
	}
	if out := e2e.Logctl(t, p, "group", "list", "--all"); !strings.Contains(out, "logd-redrive."+job.ID) {
		t.Fatalf("group list --all misses the redrive position:\n%s", out)
	}
	redriven := map[string]int{}
	for _, r := range p.ReadAll(ctx, "pay", 1)[0] {
		for _, h := range r.Headers {
			if h.Key == client.RedriveCountHeader {
				if string(h.Value) != "1" {
					t.Errorf("%s: redrive count %s", r.Value, h.Value)
				}
				redriven[string(r.Value)]++
			}
		}
	}
	if len(redriven) != n {
		t.Fatalf("redriven records: %v, want %d", redriven, n)
	}
	for v, k := range redriven {
		if k != 1 {
			t.Errorf("%s redriven %d times, want once", v, k)
		}
	}
	// Now the handler succeeds (except on the poison record): each
	// redriven record is acked once, on its first delivery.
	var mu sync.Mutex
	deliveries := map[string][]int{}
	runWorker(t, c, client.WorkerOptions{Topic: "pay", Group: "billing"}, func(_ context.Context, j *client.Job) error {
		mu.Lock()
		deliveries[string(j.Value)] = append(deliveries[string(j.Value)], j.Delivery)
		mu.Unlock()
		if string(j.Value) == "poison" {
			return client.Permanent(errors.New("poison"))
		}
		return nil
	}, finished(2*n))
	for v, ds := range deliveries {
		if fmt.Sprint(ds) != "[1]" {
			t.Errorf("%s delivered %v after redrive, want [1]", v, ds)
		}
	}
	d, err := c.DescribeQueueGroup(ctx, "pay", "billing")
	if err != nil || d.Partitions[0].Acked != n-1 || d.Partitions[0].DeadLettered != n+1 {
		t.Fatalf("after redrive: %+v %v", d.Partitions, err)
	}
	// The poison record is back in the DLQ with one redrive: the loop
	// guard refuses a second one.
	out = e2e.Logctl(t, p, "dlq", "redrive", "pay", "billing", "--reason", "rejected", "--max-redrives", "1")
	if !strings.Contains(out, "1 refused by the loop guard") {
		t.Fatalf("loop guard:\n%s", out)
	}
	if end := endOffset(t, c, "pay"); end != 2*n {
		t.Fatalf("loop guard let a record through: end %d, want %d", end, 2*n)
	}
	if v, ok := metric(t, p, "logd_queue_dead_letter_topic_records", `group="billing"`); !ok || v != n+1 {
		t.Errorf("logd_queue_dead_letter_topic_records = %v (found %v), want %d", v, ok, n+1)
	}
}

func endOffset(t *testing.T, c *client.Client, topic string) int64 {
	t.Helper()
	d, err := c.DescribeTopic(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	for _, p := range d.Partitions {
		end += p.End
	}
	return end
}

// TestOldestReadyAgeGrows: with arrivals faster than completions the
// oldest ready record gets older, in describe, in /metrics and in
// `logctl queue top --once`; pausing the group stops deliveries.
func TestOldestReadyAgeGrows(t *testing.T) {
	p := e2e.StartNode(t)
	c := newQueueClient(t, p)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "feed", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateQueueGroup(ctx, "feed", "slow", client.QueueGroupConfig{}, false); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	w, err := c.NewWorker(client.WorkerOptions{Topic: "feed", Group: "slow", MaxWait: 50 * time.Millisecond}, func(context.Context, *client.Job) error {
		time.Sleep(40 * time.Millisecond) // ~25 completions/s
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	var ages []float64
	for round := 0; round < 3; round++ {
		var batch []client.Record
		for i := 0; i < 40; i++ { // 40 per 400 ms: ~100 arrivals/s
			batch = append(batch, client.Record{Value: []byte(fmt.Sprintf("r%d-%d", round, i))})
		}
		if _, err := c.Produce(ctx, "feed", batch); err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond) // let arrivals outpace the worker over real time
		age, ok := metric(t, p, "logd_queue_oldest_ready_age_seconds", `group="slow"`)
		if !ok {
			t.Fatal("no logd_queue_oldest_ready_age_seconds")
		}
		ages = append(ages, age)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !(ages[2] > ages[0] && ages[0] > 0) {
		t.Errorf("oldest ready age did not grow: %v", ages)
	}
	d, err := c.DescribeQueueGroup(ctx, "feed", "slow")
	if err != nil || d.Partitions[0].Ready == 0 || d.Partitions[0].OldestReadyAge <= 0 {
		t.Fatalf("describe: %+v %v", d, err)
	}
	if acked, _ := metric(t, p, "logd_queue_acked_total", `group="slow"`); acked <= 0 || acked >= 120 {
		t.Errorf("logd_queue_acked_total = %v, want some but not all", acked)
	}
	// Pause: a claim gets nothing, the counts stay.
	e2e.Logctl(t, p, "queue", "pause", "feed", "slow")
	res, err := c.Claim(ctx, client.ClaimRequest{Topic: "feed", Group: "slow", MaxRecords: 5})
	if err != nil || len(res.Jobs) != 0 {
		t.Fatalf("claim while paused: %d jobs, %v", len(res.Jobs), err)
	}
	top := e2e.Logctl(t, p, "queue", "top", "feed", "slow", "--once")
	for _, want := range []string{"PAUSED", "OLDEST READY", "ACK/S", "admission refusals 0"} {
		if !strings.Contains(top, want) {
			t.Errorf("queue top --once lacks %q:\n%s", want, top)
		}
	}
	e2e.Logctl(t, p, "queue", "resume", "feed", "slow")
	res, err = c.Claim(ctx, client.ClaimRequest{Topic: "feed", Group: "slow", MaxRecords: 5})
	if err != nil || len(res.Jobs) != 5 {
		t.Fatalf("claim after resume: %d jobs, %v", len(res.Jobs), err)
	}
}
