package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
)

// ledger is a handler's own store in these tests: account balances plus the
// ids of the jobs already applied, changed together under one lock (the
// in-memory stand-in for a database transaction).
type ledger struct {
	mu       sync.Mutex
	balances map[string]int
	applied  map[string]bool
	effects  int
}

func newLedger() *ledger { return &ledger{balances: map[string]int{}, applied: map[string]bool{}} }

// credit applies a job's effect once: the job id is recorded in the same
// "transaction" as the balance change, so a redelivered job is skipped.
func (l *ledger) credit(jobID, account string, amount int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.applied[jobID] {
		return
	}
	l.applied[jobID] = true
	l.balances[account] += amount
	l.effects++
}

func (l *ledger) balance(account string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.balances[account]
}

var errNegative = errors.New("negative amount")

// creditHandler parses "account:amount" jobs; a negative amount is a
// permanent error, and failing (if set) makes every call fail transiently.
func creditHandler(l *ledger, calls *sync.Map, failing bool) client.Handler {
	return func(ctx context.Context, job *client.Job) error {
		id := fmt.Sprintf("%s/%d@%d", job.Topic, job.Partition, job.Offset)
		n, _ := calls.LoadOrStore(id, new(int))
		*n.(*int)++
		account, amt, _ := strings.Cut(string(job.Value), ":")
		amount, err := strconv.Atoi(amt)
		if err != nil {
			return client.Permanent(fmt.Errorf("bad job %q: %w", job.Value, err))
		}
		if amount < 0 {
			return client.Permanent(errNegative)
		}
		if failing {
			return errors.New("ledger database unavailable")
		}
		l.credit(id, account, amount)
		return nil
	}
}

func newQueueClient(t *testing.T, p *e2e.Node) *client.Client {
	t.Helper()
	c, err := client.New(p.Listen, client.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// runWorker runs a worker until stop returns true (checked on each job and
// every few ms of idle claims), then stops it.
func runWorker(t *testing.T, c *client.Client, opts client.WorkerOptions, h client.Handler, until func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts.MaxWait = 50 * time.Millisecond
	opts.OnError = func(err error) { t.Logf("worker: %v", err) }
	w, err := c.NewWorker(opts, h)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !until() {
		select {
		case <-ctx.Done():
			t.Fatal("worker did not reach its goal in 30s")
		case <-tick.C:
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestQueueRedeliveryAfterWorkerDeath: a worker that applied a job's effect
// and died before its ack (here the claim comes from a logctl-like raw
// claim whose process state is lost, and the server itself is SIGKILLed and
// restarted in between) gets the job redelivered, with its delivery count
// intact; the idempotent handler applies the effect once.
func TestQueueRedeliveryAfterWorkerDeath(t *testing.T) {
	p := e2e.StartNode(t)
	c := newQueueClient(t, p)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "credits", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Produce(ctx, "credits", []client.Record{{Value: []byte("alice:10")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateQueueGroup(ctx, "credits", "billing", client.QueueGroupConfig{Lease: time.Second}, false); err != nil {
		t.Fatal(err)
	}
	// The first worker claims, applies the effect, and dies before its ack.
	l := newLedger()
	res, err := c.Claim(ctx, client.ClaimRequest{Topic: "credits", Group: "billing", MaxRecords: 1})
	if err != nil || len(res.Jobs) != 1 {
		t.Fatalf("claim: %+v %v", res, err)
	}
	job := res.Jobs[0]
	l.credit(fmt.Sprintf("%s/%d@%d", job.Topic, job.Partition, job.Offset), "alice", 10)
	// The server dies too, and comes back: the lease state is replicated.
	p.Kill()
	p.Start()
	d, err := c.DescribeQueueGroup(ctx, "credits", "billing")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Partitions[0]; got.InFlight+got.Ready != 1 || got.Acked != 0 {
		t.Fatalf("after restart: %+v", got)
	}
	var calls sync.Map
	var deliveries []int
	var mu sync.Mutex
	h := creditHandler(l, &calls, false)
	runWorker(t, c, client.WorkerOptions{Topic: "credits", Group: "billing"}, func(ctx context.Context, j *client.Job) error {
		mu.Lock()
		deliveries = append(deliveries, j.Delivery)
		mu.Unlock()
		return h(ctx, j)
	}, func() bool {
		d, err := c.DescribeQueueGroup(ctx, "credits", "billing")
		return err == nil && d.Partitions[0].Acked == 1
	})
	if fmt.Sprint(deliveries) != "[2]" {
		t.Fatalf("deliveries seen by the second worker: %v, want [2]", deliveries)
	}
	if b := l.balance("alice"); b != 10 || l.effects != 1 {
		t.Fatalf("balance %d after %d effects; want 10 after 1", b, l.effects)
	}
	// The dead worker's token is stale now.
	if _, err := c.Ack(ctx, "credits", "billing", job.Token); !errors.Is(err, client.ErrStaleToken) {
		t.Fatalf("ack with the first delivery's token: %v, want ErrStaleToken", err)
	}
}

// TestQueueDeadLetters: a negative amount is dead-lettered on its first
// failure (reason rejected), a transient failure after max deliveries
// (reason max_deliveries, with backoff between attempts), and a record past
// its deadline without delivery (reason deadline_exceeded); the account is
// unchanged by all of them.
func TestQueueDeadLetters(t *testing.T) {
	p := e2e.StartNode(t)
	c := newQueueClient(t, p)
	ctx := context.Background()
	for _, topic := range []string{"ok", "flaky"} {
		if _, err := c.CreateTopic(ctx, topic, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	if _, err := c.Produce(ctx, "ok", []client.Record{
		{Value: []byte("bob:5")},
		{Value: []byte("bob:-7"), Key: []byte("neg")},
		{Value: []byte("bob:100"), Headers: []client.Header{{Key: "deadline", Value: []byte(past)}}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Produce(ctx, "flaky", []client.Record{{Value: []byte("carol:3")}}); err != nil {
		t.Fatal(err)
	}
	cfg := client.QueueGroupConfig{MaxDeliveries: 3, BackoffBase: 20 * time.Millisecond, BackoffMax: 50 * time.Millisecond}
	for _, topic := range []string{"ok", "flaky"} {
		if _, err := c.CreateQueueGroup(ctx, topic, "billing", cfg, false); err != nil {
			t.Fatal(err)
		}
	}
	l := newLedger()
	var calls sync.Map
	finished := func(topic string, want int64) func() bool {
		return func() bool {
			d, err := c.DescribeQueueGroup(ctx, topic, "billing")
			if err != nil {
				return false
			}
			var n int64
			for _, p := range d.Partitions {
				n += p.Acked + p.DeadLettered
			}
			return n == want
		}
	}
	runWorker(t, c, client.WorkerOptions{Topic: "ok", Group: "billing", Concurrency: 4}, creditHandler(l, &calls, false), finished("ok", 3))
	runWorker(t, c, client.WorkerOptions{Topic: "flaky", Group: "billing"}, creditHandler(l, &calls, true), finished("flaky", 1))
	if b := l.balance("bob"); b != 5 {
		t.Errorf("bob's balance %d, want 5 (only the valid credit)", b)
	}
	if b := l.balance("carol"); b != 0 {
		t.Errorf("carol's balance %d, want 0", b)
	}
	want := map[string]string{"bob:-7": "rejected 1", "bob:100": "deadline_exceeded 0"}
	for value, reasonAndDeliveries := range dlq(t, p, "ok.billing.dlq", 2) {
		if want[value] != reasonAndDeliveries {
			t.Errorf("dead letter %q: %s, want %s", value, reasonAndDeliveries, want[value])
		}
		delete(want, value)
	}
	if len(want) != 0 {
		t.Errorf("missing dead letters: %v", want)
	}
	if got := dlq(t, p, "flaky.billing.dlq", 2); got["carol:3"] != "max_deliveries 3" {
		t.Errorf("flaky dead letters: %v", got)
	}
	// The late record never reached a handler; the flaky one did 3 times.
	jobs := 0
	calls.Range(func(k, v any) bool {
		n := *v.(*int)
		if strings.HasPrefix(k.(string), "flaky/") && n != 3 || !strings.HasPrefix(k.(string), "flaky/") && n != 1 {
			t.Errorf("job %v handled %d times", k, n)
		}
		jobs++
		return true
	})
	if jobs != 3 { // bob:5, bob:-7 and carol:3; bob:100 never
		t.Errorf("%d distinct jobs reached handlers, want 3", jobs)
	}
}

// dlq reads a dead-letter topic and returns value -> "reason deliveries".
func dlq(t *testing.T, p *e2e.Node, topic string, partitions int32) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, recs := range p.ReadAll(context.Background(), topic, partitions) {
		for _, r := range recs {
			h := map[string]string{}
			for _, x := range r.Headers {
				h[x.Key] = string(x.Value)
			}
			if h["logd-dlq-origin-topic"] == "" || h["logd-dlq-group"] != "billing" {
				t.Errorf("dead letter %q without its origin headers: %v", r.Value, h)
			}
			out[string(r.Value)] = h["logd-dlq-reason"] + " " + h["logd-dlq-deliveries"]
		}
	}
	return out
}
