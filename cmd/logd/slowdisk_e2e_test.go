package main

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
)

// latencies records how long acknowledged produce calls took.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.d = append(l.d, d)
}

// take returns the calls recorded since the last take, sorted.
func (l *latencies) take() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.d
	l.d = nil
	slices.Sort(out)
	return out
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// term is the highest Raft term a live node reports: how many elections
// the cluster has held.
func (c *cluster) term(ctx context.Context) uint64 {
	var max uint64
	for _, nd := range c.nodes {
		if st, err := nd.status(ctx); err == nil && st.Term > max {
			max = st.Term
		}
	}
	return max
}

// TestClusterSlowDisk is the slow disk of T15 (docs/faults.md): one node's
// fsyncs (of its partition logs, and its Raft log store's commits) take
// longer (LOGD_FAULT_SLOW_FSYNC), first while it follows, then while it
// leads, under eight producers. Nothing acknowledged may be lost. It
// reports each phase's produce latency and elections; they are figures,
// not asserted (the machine is shared).
func TestClusterSlowDisk(t *testing.T) {
	// Each phase is timed: its length is its cost. The short run's phases
	// still take hundreds of writes each; make fault measures.
	phase, delay := 2*time.Second, "20ms,20ms"
	if faultLong() {
		phase = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := newCluster(t, 3, "--snapshot-threshold", "1024", "--snapshot-interval", "1s")
	const parts = 3
	createTopic(t, ctx, c.nodes[0], "slow", parts, nil)
	ps := newProducers(1)
	lat := &latencies{}
	ps.lat = lat
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); ps.run(ctx, t, c.nodes[i%3].listen, "slow", i, stop) }()
	}
	measure := func(name string) {
		lat.take()
		term := c.term(ctx)
		time.Sleep(phase) // a timed phase of load: the measurement is the wait
		d := lat.take()
		t.Logf("%s: %d acknowledged calls in %v, latency p50 %v p99 %v max %v, %d elections",
			name, len(d), phase, quantile(d, 0.5), quantile(d, 0.99), quantile(d, 1), c.term(ctx)-term)
	}
	measure("baseline")

	slow := c.nodes[2]
	if slow == c.leader(ctx) {
		slow = c.nodes[1]
	}
	slow.kill()
	slow.launchWith("", "LOGD_FAULT_SLOW_FSYNC="+delay)
	waitFor(t, ctx, slow.id+" ready with a slow disk", func() bool {
		st, err := slow.status(ctx)
		return err == nil && st.Ready
	})
	measure("slow follower (" + delay + ")")

	if _, err := c.leader(ctx).rpc.TransferLeadership(ctx, connect.NewRequest(&logdv1.TransferLeadershipRequest{NodeId: slow.id})); err != nil {
		t.Fatalf("transfer leadership to %s: %v", slow.id, err)
	}
	waitFor(t, ctx, slow.id+" leads", func() bool { return c.leader(ctx) == slow })
	measure("slow leader (" + delay + ")")

	close(stop)
	wg.Wait()
	c.converge(ctx)
	c.checkEveryNode(ctx, "slow", parts, ps.acks, ps.attempted)
	t.Logf("%d calls (%d failed or unknown), %d acknowledged", ps.calls, ps.failed, len(ps.acks))
}
