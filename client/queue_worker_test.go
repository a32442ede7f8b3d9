package client_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
)

// manualClock is a client.Clock that moves only by Advance; sleepers wake
// when it passes their deadline. changed is closed and replaced whenever a
// sleeper arrives or leaves, so tests wait for the worker's state without
// sleeping.
type manualClock struct {
	mu       sync.Mutex
	now      time.Time
	sleepers map[*sleeper]bool
	changed  chan struct{}
}

type sleeper struct {
	until time.Time
	wake  chan struct{}
}

// newManualClock starts at the wall clock's second, as the node's clock
// (it stamps the node's commands) should where the server reads the wall
// clock too (record timestamps).
func newManualClock() *manualClock {
	return &manualClock{now: time.Now().UTC().Truncate(time.Second), sleepers: map[*sleeper]bool{}, changed: make(chan struct{})}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *manualClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	s := &sleeper{until: c.now.Add(d), wake: make(chan struct{})}
	c.sleepers[s] = true
	c.notifyLocked()
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.sleepers, s)
		c.notifyLocked()
		c.mu.Unlock()
	}()
	select {
	case <-s.wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Advance moves the clock and wakes the sleepers it passed.
func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for s := range c.sleepers {
		if !c.now.Before(s.until) {
			delete(c.sleepers, s)
			close(s.wake)
		}
	}
	c.notifyLocked()
}

// waitSleepers waits until the clock's sleepers (how long each has left)
// satisfy cond.
func (c *manualClock) waitSleepers(t *testing.T, what string, cond func(left []time.Duration) bool) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		var left []time.Duration
		for s := range c.sleepers {
			left = append(left, s.until.Sub(c.now))
		}
		ch := c.changed
		c.mu.Unlock()
		if cond(left) {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("timed out waiting for %s; sleepers have %v left", what, left)
		}
	}
}

// queueFixture is a node on the manual clock with topic "jobs", one record
// "job-1", and queue group "w" with a 10 s lease.
func queueFixture(t *testing.T) (*logdtest.Server, *client.Client, *manualClock) {
	t.Helper()
	clk := newManualClock()
	srv := logdtest.Start(t, logdtest.Options{Now: clk.Now})
	c, err := client.New(srv.Addr(), client.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "jobs", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Produce(ctx, "jobs", []client.Record{{Value: []byte("job-1")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateQueueGroup(ctx, "jobs", "w", client.QueueGroupConfig{Lease: 10 * time.Second, MaxDeliveries: 3}, false); err != nil {
		t.Fatal(err)
	}
	return srv, c, clk
}

// startWorker runs a worker on the manual clock; the returned stop ends it
// and returns once Run has (every ack and nack sent). stop may be called
// again.
func startWorker(t *testing.T, c *client.Client, clk *manualClock, h client.Handler) (stop func()) {
	t.Helper()
	w, err := c.NewWorker(client.WorkerOptions{Topic: "jobs", Group: "w", Lease: 10 * time.Second, MaxWait: 20 * time.Millisecond, Clock: clk,
		OnError: func(err error) { t.Errorf("worker: %v", err) }}, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
	}
}

// TestWorkerExtendsLongJobs steps a job that outlives its 10 s lease: the
// worker extends at each half-life (5 s left of 10), the job is still in
// flight past its first deadline, and once the handler returns the job is
// acked and the extender is gone: no sleeper left, no extend however far
// the clock moves.
func TestWorkerExtendsLongJobs(t *testing.T) {
	srv, c, clk := queueFixture(t)
	ctx := context.Background()
	started, release := make(chan struct{}), make(chan struct{})
	acked := make(chan struct{}, 1)
	srv.Intercept("Ack", func(context.Context) error { acked <- struct{}{}; return nil })
	stop := startWorker(t, c, clk, func(ctx context.Context, job *client.Job) error {
		close(started)
		<-release
		return ctx.Err() // nil: the lease was never lost
	})
	defer stop()
	<-started
	halfLife := func(left []time.Duration) bool { return len(left) == 1 && left[0] == 5*time.Second }
	for i := 1; i <= 3; i++ {
		clk.waitSleepers(t, "the extender's half-life sleep", halfLife)
		if n := srv.Calls("Extend"); n != i-1 {
			t.Fatalf("before half-life %d: %d extends", i, n)
		}
		clk.Advance(5 * time.Second)
	}
	clk.waitSleepers(t, "the extender after its third extend", halfLife)
	if n := srv.Calls("Extend"); n != 3 {
		t.Fatalf("extends after 15 s: %d, want 3", n)
	}
	// 15 s in: past the first lease deadline (10 s), still in flight.
	d, err := c.DescribeQueueGroup(ctx, "jobs", "w")
	if err != nil {
		t.Fatal(err)
	}
	if p := d.Partitions[0]; p.InFlight != 1 || p.Expired != 0 {
		t.Fatalf("at 15 s: %+v", p)
	}

	close(release)
	// The ack call has begun: the extender ended before the ack was
	// queued, so nothing sleeps on the clock any more.
	<-acked
	clk.waitSleepers(t, "no sleeper", func(left []time.Duration) bool { return len(left) == 0 })
	// Run returns once the ack is answered; however far the clock moves
	// then, no extend follows.
	stop()
	clk.Advance(time.Minute)
	if n := srv.Calls("Extend"); n != 3 {
		t.Fatalf("extends after the handler returned: %d, want still 3", n)
	}
	d, err = c.DescribeQueueGroup(ctx, "jobs", "w")
	if err != nil {
		t.Fatal(err)
	}
	if p := d.Partitions[0]; p.Acked != 1 || p.InFlight != 0 || p.DoneOffset != 1 {
		t.Fatalf("after the ack: %+v", p)
	}
}

// TestWorkerOutcomes: a handler's result decides the ack or nack.
func TestWorkerOutcomes(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		check   func(t *testing.T, p client.QueuePartitionState, dead []client.DeadLetter)
		ackCall int
		nackCal int
	}{
		{
			name: "success acks", err: nil, ackCall: 1,
			check: func(t *testing.T, p client.QueuePartitionState, dead []client.DeadLetter) {
				if p.Acked != 1 || p.DoneOffset != 1 || len(dead) != 0 {
					t.Errorf("state %+v, dead %v", p, dead)
				}
			},
		},
		{
			name: "error nacks transiently", err: errors.New("database down"), nackCal: 1,
			check: func(t *testing.T, p client.QueuePartitionState, dead []client.DeadLetter) {
				// Offered again after the group's backoff: delayed, not done.
				if p.Delayed != 1 || p.Nacked != 1 || p.DoneOffset != 0 || len(dead) != 0 {
					t.Errorf("state %+v, dead %v", p, dead)
				}
			},
		},
		{
			name: "permanent error dead-letters", err: client.Permanent(errors.New("negative amount")), nackCal: 1,
			check: func(t *testing.T, p client.QueuePartitionState, dead []client.DeadLetter) {
				if p.DeadLettered != 1 || p.DoneOffset != 1 || len(dead) != 1 {
					t.Fatalf("state %+v, dead %v", p, dead)
				}
				d := dead[0]
				if d.Reason != "rejected" || !strings.Contains(d.LastError, "negative amount") || string(d.Value) != "job-1" ||
					d.OriginTopic != "jobs" || d.OriginOffset != 0 || d.Group != "w" || d.Deliveries != 1 {
					t.Errorf("dead letter %+v", d)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, c, clk := queueFixture(t)
			ctx := context.Background()
			ran := make(chan struct{})
			var once sync.Once
			stop := startWorker(t, c, clk, func(ctx context.Context, job *client.Job) error {
				once.Do(func() { close(ran) })
				return tt.err
			})
			<-ran
			stop() // Run returns after the job's ack or nack is sent
			if a, n := srv.Calls("Ack"), srv.Calls("Nack"); a != tt.ackCall || n != tt.nackCal {
				t.Fatalf("ack calls %d, nack calls %d; want %d, %d", a, n, tt.ackCall, tt.nackCal)
			}
			d, err := c.DescribeQueueGroup(ctx, "jobs", "w")
			if err != nil {
				t.Fatal(err)
			}
			var dead []client.DeadLetter
			if err := c.ListDeadLetters(ctx, d.Config.DeadLetterTopic, client.DeadLetterFilter{}, func(dl client.DeadLetter) error {
				dead = append(dead, dl)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			tt.check(t, d.Partitions[0], dead)
		})
	}
}

// TestWorkerNamesItself: a worker's claims carry its worker id, host and
// process by default, and describe's in-flight list shows it while the
// handler runs.
func TestWorkerNamesItself(t *testing.T) {
	_, c, clk := queueFixture(t)
	seen := make(chan client.QueueGroupDescription, 1)
	stop := startWorker(t, c, clk, func(ctx context.Context, job *client.Job) error {
		d, err := c.DescribeQueueGroupInFlight(ctx, "jobs", "w")
		if err != nil {
			return err
		}
		seen <- d
		return nil
	})
	defer stop()
	var d client.QueueGroupDescription
	select {
	case d = <-seen:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler never ran")
	}
	want := client.DefaultWorkerID()
	if len(d.InFlight) != 1 || d.InFlight[0].Worker != want || d.InFlight[0].Delivery != 1 || d.InFlight[0].Offset != 0 {
		t.Fatalf("in flight = %+v, want offset 0 by %q", d.InFlight, want)
	}
	if !strings.Contains(want, "/") {
		t.Fatalf("default worker id %q is not host/pid", want)
	}
}
