package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
)

// TestQueueAttemptHistory: a record's first worker (a logctl claim whose
// process is gone before its ack) loses its lease, a second worker nacks
// it, a third (a client.Worker) rejects it; the dead letter lists the three attempts with
// their workers and outcomes, in the Go client and in logctl dlq list
// --history.
func TestQueueAttemptHistory(t *testing.T) {
	p := e2e.StartNode(t)
	c := newQueueClient(t, p)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "pay", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateQueueGroup(ctx, "pay", "billing", client.QueueGroupConfig{Lease: time.Second, MaxDeliveries: 5,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 10 * time.Millisecond}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Produce(ctx, "pay", []client.Record{{Key: []byte("acct-7"), Value: []byte("acct-7:-250")}}); err != nil {
		t.Fatal(err)
	}
	// Worker A claims and is gone: its lease of 1 s runs out.
	if out := e2e.Logctl(t, p, "queue", "claim", "pay", "billing", "--worker", "worker-a", "--lease", "1s"); !strings.Contains(out, "acct-7:-250") {
		t.Fatalf("logctl claim: %s", out)
	}
	if out := e2e.Logctl(t, p, "queue", "describe", "pay", "billing", "--in-flight"); !strings.Contains(out, "worker-a") {
		t.Fatalf("describe --in-flight does not show worker-a:\n%s", out)
	}
	var handled atomic.Int32
	run := func(id string, h client.Handler) {
		t.Helper()
		before := handled.Load()
		runWorker(t, c, client.WorkerOptions{Topic: "pay", Group: "billing", WorkerID: id, Lease: time.Second}, func(ctx context.Context, j *client.Job) error {
			defer handled.Add(1)
			return h(ctx, j)
		}, func() bool { return handled.Load() > before })
	}
	// Worker B fails transiently. It claims and nacks by hand: a
	// client.Worker could claim the record again before it is stopped.
	waitCtx0, cancel0 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel0()
	res, err := c.Claim(waitCtx0, client.ClaimRequest{Topic: "pay", Group: "billing", Worker: "worker-b", Lease: time.Second, MaxWait: 5 * time.Second})
	if err != nil || len(res.Jobs) != 1 || res.Jobs[0].Delivery != 2 {
		t.Fatalf("worker-b's claim: %+v, %v", res, err)
	}
	if _, err := c.Nack(ctx, "pay", "billing", client.Nack{Token: res.Jobs[0].Token, Error: "ledger timeout"}); err != nil {
		t.Fatal(err)
	}
	// Worker C, a client.Worker, rejects it: dead-lettered at once.
	run("worker-c", func(context.Context, *client.Job) error { return client.Permanent(errors.New("negative amount")) })

	var dls []client.DeadLetter
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	e2e.WaitFor(t, waitCtx, "the dead letter", func() bool {
		dls = dls[:0]
		err := c.ListDeadLetters(ctx, "pay.billing.dlq", client.DeadLetterFilter{}, func(d client.DeadLetter) error { dls = append(dls, d); return nil })
		return err == nil && len(dls) == 1
	})
	d := dls[0]
	if d.Reason != "rejected" || d.History == nil {
		t.Fatalf("dead letter %+v", d)
	}
	var got []string
	for _, a := range d.History.Attempts {
		got = append(got, fmt.Sprintf("%d %s %s %q", a.Delivery, a.Worker, a.Outcome, a.Error))
		if a.Claimed.IsZero() || a.Ended.Before(a.Claimed) || a.LeaseUntil.IsZero() {
			t.Errorf("attempt %+v: times out of order", a)
		}
	}
	want := []string{`1 worker-a lease_expired ""`, `2 worker-b nacked "ledger timeout"`, `3 worker-c rejected "negative amount"`}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("history:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	out := e2e.Logctl(t, p, "dlq", "list", "pay", "billing", "--history")
	for _, w := range []string{"worker worker-a", "lease_expired", "worker worker-b", "ledger timeout", "worker worker-c", "negative amount"} {
		if !strings.Contains(out, w) {
			t.Errorf("dlq list --history lacks %q:\n%s", w, out)
		}
	}
}

// TestQueueAdmissionByAge: with queue.max.backlog.age.ms, a stalled worker
// pool makes produces wait: producers that retry on each refusal after its
// retry-after (capped for the test) get every record in once the workers
// come back. No record is lost or duplicated, every refusal carries a
// retry-after, and describe and the metrics show the bound and the age.
func TestQueueAdmissionByAge(t *testing.T) {
	p := e2e.StartNode(t)
	c := newQueueClient(t, p)
	raw := noRetryClient(t, p)
	ctx := context.Background()
	const bound = 300 * time.Millisecond
	if _, err := c.CreateTopic(ctx, "jobs", 2, map[string]string{"queue.max.backlog.age.ms": fmt.Sprint(bound.Milliseconds())}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateQueueGroup(ctx, "jobs", "w", client.QueueGroupConfig{}, false); err != nil {
		t.Fatal(err)
	}
	const producers, perProducer = 3, 20
	var mu sync.Mutex
	var refusals, badHints int
	acked := map[string]bool{}
	produceAll := func(id int) error {
		for i := range perProducer {
			v := fmt.Sprintf("p%d-%02d", id, i)
			for attempt := 0; ; attempt++ {
				if attempt > 1000 {
					return fmt.Errorf("%s: still refused after 1000 attempts", v)
				}
				_, err := raw.Produce(ctx, "jobs", []client.Record{{Value: []byte(v), IdempotencyKey: v}})
				var oe *client.OverloadedError
				if errors.As(err, &oe) {
					mu.Lock()
					refusals++
					if oe.RetryAfter < 100*time.Millisecond || oe.RetryAfter > 30*time.Second {
						badHints++
					}
					mu.Unlock()
					time.Sleep(min(oe.RetryAfter, 100*time.Millisecond))
					continue
				}
				if err != nil {
					return fmt.Errorf("%s: %w", v, err)
				}
				mu.Lock()
				acked[v] = true
				mu.Unlock()
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	}
	// The pool stalls: nobody claims for a while, so the oldest record
	// passes the bound and produces are refused.
	errs := make(chan error, producers)
	for id := range producers {
		go func() { errs <- produceAll(id) }()
	}
	waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	e2e.WaitFor(t, waitCtx, "a refusal by age", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return refusals > 0
	})
	d, err := c.DescribeQueueGroup(ctx, "jobs", "w")
	if err != nil {
		t.Fatal(err)
	}
	if d.MaxBacklogAge != bound || d.OldestUnfinishedAge < bound {
		t.Errorf("describe during the stall: bound %v, oldest %v; want %v and at least it", d.MaxBacklogAge, d.OldestUnfinishedAge, bound)
	}
	if v, ok := metric(t, p, "logd_queue_max_backlog_age_seconds", `topic="jobs"`); !ok || v != bound.Seconds() {
		t.Errorf("logd_queue_max_backlog_age_seconds = %v (%v)", v, ok)
	}
	if v, ok := metric(t, p, "logd_queue_oldest_unfinished_age_seconds", `topic="jobs"`); !ok || v < bound.Seconds() {
		t.Errorf("logd_queue_oldest_unfinished_age_seconds = %v (%v)", v, ok)
	}
	// The pool comes back.
	handled := map[string]int{}
	var hmu sync.Mutex
	runWorker(t, c, client.WorkerOptions{Topic: "jobs", Group: "w", Concurrency: 4}, func(ctx context.Context, j *client.Job) error {
		hmu.Lock()
		handled[string(j.Value)]++
		hmu.Unlock()
		return nil
	}, func() bool {
		hmu.Lock()
		defer hmu.Unlock()
		return len(handled) == producers*perProducer
	})
	for range producers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	for _, recs := range p.ReadAll(ctx, "jobs", 2) {
		for _, r := range recs {
			seen[string(r.Value)]++
		}
	}
	for v := range acked {
		if seen[v] != 1 || handled[v] != 1 {
			t.Errorf("%s: acked, %d times in the topic, handled %d times", v, seen[v], handled[v])
		}
	}
	if len(seen) != producers*perProducer || len(acked) != producers*perProducer {
		t.Errorf("topic holds %d records, %d acked, want %d", len(seen), len(acked), producers*perProducer)
	}
	if badHints > 0 {
		t.Errorf("%d of %d refusals had a retry-after outside [100ms, 30s]", badHints, refusals)
	}
	t.Logf("%d records, age bound %v: %d refusals", len(acked), bound, refusals)
}
