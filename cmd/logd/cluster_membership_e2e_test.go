package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
)

// TestClusterRemoveAndTransferUnderLoad: while six producers write,
// `logctl cluster transfer-leadership` moves the leader, `logctl cluster
// remove` takes a follower out, and leadership moves again. No
// acknowledged record is lost on the remaining nodes, and the removed node
// (still running) never acknowledges a write the cluster does not hold.
func TestClusterRemoveAndTransferUnderLoad(t *testing.T) {
	between := 150
	if faultLong() {
		between = 1500
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := newCluster(t, 3)
	const parts = 3
	createTopic(t, ctx, c.nodes[0], "r", parts, nil)
	ps := newProducers(5)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() { defer wg.Done(); ps.run(ctx, t, c.nodes[i%3].listen, "r", i, stop) }()
	}
	progress := func(what string) { ps.waitAcks(t, ctx, what, between) }
	progress("acks before the first transfer")

	// 1. Hand leadership to a named follower, through a follower.
	l := c.leader(ctx)
	var target, via *node
	for _, nd := range c.nodes {
		if nd != l && target == nil {
			target = nd
		} else if nd != l {
			via = nd
		}
	}
	out := logctl(t, via, "cluster", "transfer-leadership", target.id)
	t.Logf("transfer-leadership %s (leader was %s): %s", target.id, l.id, strings.TrimSpace(out))
	if got := c.leader(ctx); got != target {
		t.Fatalf("leader after the transfer is %s, want %s", got.id, target.id)
	}
	progress("acks after the first transfer")

	// 2. Remove a follower (the old leader), through the new leader.
	removed := l
	out = logctl(t, target, "cluster", "remove", removed.id)
	t.Logf("remove %s: %s", removed.id, strings.TrimSpace(out))
	acksAtRemoval := ps.ackCount()
	var rest []*node
	for _, nd := range c.nodes {
		if nd != removed {
			rest = append(rest, nd)
		}
	}
	progress("acks after the removal")

	// 3. Move leadership again, to the other remaining node.
	other := rest[0]
	if other == target {
		other = rest[1]
	}
	out = logctl(t, target, "cluster", "transfer-leadership", other.id)
	t.Logf("transfer-leadership %s: %s", other.id, strings.TrimSpace(out))
	progress("acks after the second transfer")

	// The removed node, still running, is asked directly: whatever it
	// acknowledges must be held by the cluster.
	probeAcked, probes := 0, 20
	for i := range probes {
		v := fmt.Sprintf("removed-%d", i)
		ps.mu.Lock()
		ps.attempted[v] = true
		ps.mu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := removed.rpc.Produce(cctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "r", Records: []*logdv1.Record{{Value: []byte(v)}}}))
		cancel()
		if err == nil {
			probeAcked++
			ps.mu.Lock()
			ps.acks = append(ps.acks, ack{resp.Msg.Results[0].Partition, resp.Msg.Results[0].Offset, v})
			ps.mu.Unlock()
		}
	}
	if st, err := removed.status(ctx); err == nil && st.State == "Leader" {
		t.Errorf("the removed node %s reports itself leader", removed.id)
	}
	close(stop)
	wg.Wait()

	remaining := &cluster{t: t, nodes: rest}
	remaining.converge(ctx)
	for _, nd := range rest {
		st, err := nd.status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range st.Members {
			if m.Id == removed.id {
				t.Errorf("%s still lists %s as a member (%s)", nd.id, removed.id, m.Suffrage)
			}
		}
	}
	remaining.checkEveryNode(ctx, "r", parts, ps.acks, ps.attempted)
	t.Logf("%d calls (%d failed or unknown), %d records acknowledged (%d after the removal); removed node acknowledged %d of %d direct writes",
		ps.calls, ps.failed, len(ps.acks), len(ps.acks)-acksAtRemoval, probeAcked, probes)
}
