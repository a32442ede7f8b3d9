package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/internal/e2e"
)

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
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
	if e2e.FaultLong() {
		phase = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := e2e.NewCluster(t, 3, "--snapshot-threshold", "1024", "--snapshot-interval", "1s")
	const parts = 3
	e2e.CreateTopic(t, ctx, c.Nodes[0], "slow", parts, nil)
	ps := e2e.NewProducers(1)
	lat := &e2e.Latencies{}
	ps.Lat = lat
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); ps.Run(ctx, t, c.Nodes[i%3].Listen, "slow", i, stop) }()
	}
	measure := func(name string) {
		lat.Take()
		term := c.Term(ctx)
		time.Sleep(phase) // a timed phase of load: the measurement is the wait
		d := lat.Take()
		t.Logf("%s: %d acknowledged calls in %v, latency p50 %v p99 %v max %v, %d elections",
			name, len(d), phase, quantile(d, 0.5), quantile(d, 0.99), quantile(d, 1), c.Term(ctx)-term)
	}
	measure("baseline")

	slow := c.Nodes[2]
	if slow == c.Leader(ctx) {
		slow = c.Nodes[1]
	}
	slow.Kill()
	slow.LaunchWith("", "LOGD_FAULT_SLOW_FSYNC="+delay)
	e2e.WaitFor(t, ctx, slow.ID+" ready with a slow disk", func() bool {
		st, err := slow.Status(ctx)
		return err == nil && st.Ready
	})
	measure("slow follower (" + delay + ")")

	// A transfer to a node with a slow disk under produce may time out
	// (Raft's transfer waits for the target to catch up for about an
	// election timeout): tried again, a few times.
	for try := 1; c.Leader(ctx) != slow; try++ {
		_, err := c.Leader(ctx).RPC.TransferLeadership(ctx, connect.NewRequest(&logdv1.TransferLeadershipRequest{NodeId: slow.ID}))
		if err == nil {
			break
		}
		if try == 5 {
			t.Fatalf("transfer leadership to %s, %d tries: %v", slow.ID, try, err)
		}
		t.Logf("transfer leadership to %s, try %d: %v", slow.ID, try, err)
	}
	e2e.WaitFor(t, ctx, slow.ID+" leads", func() bool { return c.Leader(ctx) == slow })
	measure("slow leader (" + delay + ")")

	close(stop)
	wg.Wait()
	c.Converge(ctx)
	c.CheckEveryNode(ctx, "slow", parts, ps.Acks, ps.Attempted)
	t.Logf("%d calls (%d failed or unknown), %d acknowledged", ps.Calls, ps.Failed, len(ps.Acks))
}
