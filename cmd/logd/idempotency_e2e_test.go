package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
)

// killProxy forwards TCP connections to a logd process. Armed, it kills
// the process the moment the first response bytes come back, so a request
// is committed and applied but its reply never reaches the client.
type killProxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	armed   bool
	onFire  func()
	wg      sync.WaitGroup
	stopped chan struct{}
}

func startKillProxy(t *testing.T, target string, onFire func()) *killProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	kp := &killProxy{ln: ln, target: target, onFire: onFire, stopped: make(chan struct{})}
	kp.wg.Add(1)
	go kp.accept()
	t.Cleanup(func() {
		close(kp.stopped)
		ln.Close()
		kp.wg.Wait()
	})
	return kp
}

func (kp *killProxy) arm() {
	kp.mu.Lock()
	kp.armed = true
	kp.mu.Unlock()
}

func (kp *killProxy) accept() {
	defer kp.wg.Done()
	for {
		c, err := kp.ln.Accept()
		if err != nil {
			return
		}
		kp.wg.Add(1)
		go func() {
			defer kp.wg.Done()
			kp.serve(c)
		}()
	}
}

func (kp *killProxy) serve(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", kp.target)
	if err != nil {
		return
	}
	defer s.Close()
	go func() {
		io.Copy(s, c)
		s.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			kp.mu.Lock()
			fire := kp.armed
			kp.armed = false
			kp.mu.Unlock()
			if fire {
				kp.onFire() // the reply was written: the append is applied
				return
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
		select {
		case <-kp.stopped:
			return
		default:
		}
	}
}

// TestIdempotentRetryAfterKill kills logd after it applied a keyed append
// but before the client saw the reply; the client's own retry (with the
// same key) returns the original offset, marked duplicate, and the topic
// holds the record once.
func TestIdempotentRetryAfterKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := e2e.StartNode(t)
	fired := make(chan struct{})
	kp := startKillProxy(t, p.Listen, func() {
		p.Cmd.Process.Kill() // SIGKILL; the test goroutine reaps and restarts it
		close(fired)
	})
	c, err := client.New(kp.ln.Addr().String(), client.Options{
		Timeout: 5 * time.Second,
		Retry:   client.RetryPolicy{MaxAttempts: 60, InitialBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "pay", 2, nil); err != nil {
		t.Fatal(err)
	}
	first, err := c.Produce(ctx, "pay", []client.Record{{Value: []byte("warm-up"), IdempotencyKey: "w"}})
	if err != nil {
		t.Fatal(err)
	}
	kp.arm()
	rec := client.Record{Key: []byte("acct-1"), Value: []byte(`{"credit":10}`), IdempotencyKey: "payment-17"}
	type outcome struct {
		res []client.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := c.Produce(ctx, "pay", []client.Record{rec})
		done <- outcome{res, err}
	}()
	select {
	case <-fired:
	case o := <-done:
		t.Fatalf("produce finished before the kill: %+v", o)
	}
	p.Kill()
	p.Start()
	o := <-done
	res, err := o.res, o.err
	if err != nil {
		t.Fatalf("produce with retries: %v", err)
	}
	if !res[0].Duplicate {
		t.Fatalf("retry after the kill answered %+v: want the original offset marked duplicate", res[0])
	}
	// The record is in the topic exactly once, at the offset the retry
	// reported.
	got := p.ReadAll(ctx, "pay", 2)
	count := 0
	for part, recs := range got {
		for _, r := range recs {
			if string(r.Value) == `{"credit":10}` {
				count++
				if part != res[0].Partition || r.Offset != res[0].Offset {
					t.Errorf("record at %d/%d, retry reported %d/%d", part, r.Offset, res[0].Partition, res[0].Offset)
				}
			}
		}
	}
	if count != 1 {
		t.Fatalf("record appears %d times, want once", count)
	}
	_ = first
}

// TestIdempotencyConflictAndBatch: the same key with another payload is
// refused and appends nothing; a batch with some known keys appends only
// the new records and answers each one; the window survives a restart.
func TestIdempotencyConflictAndBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := e2e.StartNode(t)
	c, err := client.New(p.Listen, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	recs := func(keys ...string) []client.Record {
		var out []client.Record
		for _, k := range keys {
			out = append(out, client.Record{Value: []byte("v-" + k), IdempotencyKey: k})
		}
		return out
	}
	r1, err := c.Produce(ctx, "orders", recs("a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Produce(ctx, "orders", []client.Record{{Value: []byte("other payload"), IdempotencyKey: "a"}})
	if !errors.Is(err, client.ErrIdempotencyConflict) {
		t.Fatalf("reused key with another payload: %v, want ErrIdempotencyConflict", err)
	}
	p.Stop()
	p.Start()
	r2, err := c.Produce(ctx, "orders", recs("b", "c", "a", "c"))
	if err != nil {
		t.Fatal(err)
	}
	want := []client.Result{
		{Partition: 0, Offset: r1[1].Offset, Duplicate: true},
		{Partition: 0, Offset: 2},
		{Partition: 0, Offset: r1[0].Offset, Duplicate: true},
		{Partition: 0, Offset: 2, Duplicate: true},
	}
	if fmt.Sprint(r2) != fmt.Sprint(want) {
		t.Fatalf("batch answers %v, want %v", r2, want)
	}
	// One call that gives a key two payloads is refused whole.
	_, err = c.Produce(ctx, "orders", []client.Record{{Value: []byte("one"), IdempotencyKey: "d"}, {Value: []byte("new"), IdempotencyKey: "e"}, {Value: []byte("two"), IdempotencyKey: "d"}})
	if !errors.Is(err, client.ErrIdempotencyConflict) {
		t.Fatalf("one key with two payloads in one call: %v, want ErrIdempotencyConflict", err)
	}
	got := e2e.Render(p.ReadAll(ctx, "orders", 1))
	if got != "0: 0=v-a 1=v-b 2=v-c" {
		t.Fatalf("log = %s", got)
	}
}

// TestIdempotencyWindowAcrossSnapshotsAndKill: snapshots are taken over
// and over while producers append keyed records (each snapshot freezes
// the windows and encodes them while appends go on), then logd is killed
// with SIGKILL and restarted from its last snapshot and Raft log. A retry
// of every record must be answered as a duplicate at its original offset,
// and the topic must hold every record once.
func TestIdempotencyWindowAcrossSnapshotsAndKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The meta group's snapshots, which its partitions' appends drive.
	p := e2e.StartNode(t, append(e2e.MetaGroupOnly(), "--snapshot-threshold", "8", "--snapshot-interval", "50ms")...)
	c, err := client.New(p.Listen, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const producers, calls, perCall, parts = 4, 40, 50, 4
	if _, err := c.CreateTopic(ctx, "snap", parts, nil); err != nil {
		t.Fatal(err)
	}
	// Keys of ~40 bytes: 8,000 of them fill several ring chunks and arena
	// blocks of the window.
	record := func(g, i int) client.Record {
		k := fmt.Sprintf("order-2026-11-29-producer-%d-%08d", g, i)
		return client.Record{Key: []byte(k), Value: []byte("v-" + k), IdempotencyKey: k}
	}
	type pos struct {
		part int32
		off  int64
	}
	var (
		mu   sync.Mutex
		want = map[string]pos{}
		wg   sync.WaitGroup
		errs = make(chan error, producers)
	)
	for g := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for call := range calls {
				recs := make([]client.Record, perCall)
				for j := range recs {
					recs[j] = record(g, call*perCall+j)
				}
				res, err := c.Produce(ctx, "snap", recs)
				if err != nil {
					errs <- fmt.Errorf("producer %d call %d: %w", g, call, err)
					return
				}
				mu.Lock()
				for j, r := range res {
					want[recs[j].IdempotencyKey] = pos{r.Partition, r.Offset}
				}
				mu.Unlock()
				for j, r := range res {
					if r.Duplicate {
						errs <- fmt.Errorf("producer %d call %d: new key %s answered duplicate", g, call, recs[j].IdempotencyKey)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	snaps, _ := filepath.Glob(filepath.Join(p.DataDir, "raft", "snapshots", "*", "state.bin"))
	if len(snaps) == 0 {
		t.Fatal("no snapshot was taken during the load")
	}
	p.Kill()
	p.Start()
	// Retry every record, in calls of 500 (a producer that never saw its
	// replies would): all are duplicates at their original offsets.
	for g := range producers {
		for from := 0; from < calls*perCall; from += 500 {
			recs := make([]client.Record, 500)
			for j := range recs {
				recs[j] = record(g, from+j)
			}
			res, err := c.Produce(ctx, "snap", recs)
			if err != nil {
				t.Fatalf("retry producer %d from %d: %v", g, from, err)
			}
			for j, r := range res {
				k := recs[j].IdempotencyKey
				if w := want[k]; !r.Duplicate || r.Partition != w.part || r.Offset != w.off {
					t.Fatalf("retry of %s after the restart = %+v, want a duplicate at %d/%d", k, r, w.part, w.off)
				}
			}
		}
	}
	total := 0
	for part, recs := range p.ReadAll(ctx, "snap", parts) {
		for _, r := range recs {
			total++
			if w, ok := want[string(r.Key)]; !ok || w.part != part || w.off != r.Offset {
				t.Fatalf("record %s at %d/%d, produced at %+v", r.Key, part, r.Offset, w)
			}
		}
	}
	if total != producers*calls*perCall {
		t.Fatalf("topic holds %d records, want %d", total, producers*calls*perCall)
	}
}
