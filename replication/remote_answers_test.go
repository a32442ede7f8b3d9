package replication

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/internal/membudget"
)

// TestRemoteReadsCharged: a read a node serves to another over the Raft
// port is charged to the node's answer budget, keyed by the asking node,
// and given back once written; with the budget full, the read is
// answered overloaded after its wait, and the asking node's caller gets
// backend.ErrOverloaded.
func TestRemoteReadsCharged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, nodes, describe := dataGroupCluster(ctx, t, func(cfg *Config) { cfg.DataGroupsPerNode, cfg.ReplicationFactor = 2, 2 })
	b := NewBackend(nodes[0])
	waitFor(ctx, t, "six data groups", func() bool { return len(nodes[0].FSM().DataGroups().Groups) == 6 }, describe)
	fillTopic(ctx, t, b, "rr", 6, 20)
	top, err := nodes[0].FSM().Topic("rr")
	if err != nil {
		t.Fatal(err)
	}
	// A partition, a node that serves its group and one that asks it.
	var (
		p           int32
		server, ask *Node
		g           uint64
	)
	for i, pg := range top.Placement {
		for _, dg := range nodes[0].FSM().DataGroups().Groups {
			if dg.ID != pg {
				continue
			}
			for _, n := range nodes {
				if slices.Contains(dg.Replicas, n.NodeID()) && server == nil {
					server, p, g = n, int32(i), pg
				}
			}
		}
		if server != nil {
			break
		}
	}
	for _, n := range nodes {
		if n != server {
			ask = n
			break
		}
	}
	waitOwnReplica(ctx, t, server, "rr", p, 20, describe)
	budget := membudget.New(1<<20, 1<<19)
	server.SetAnswerBudget(budget)
	read := groupCall{Kind: callRead, Read: &readCall{Topic: "rr", Partition: p, Offset: 0, MaxBytes: 64 << 10}}

	ans, err := ask.callGroup(ctx, server.NodeID(), g, read)
	if err != nil || ans.Err != nil || ans.Read == nil || len(ans.Read.Batches) == 0 {
		t.Fatalf("read of rr-%d at %s: %v, %+v", p, server.NodeID(), err, ans.Err)
	}
	// The server lets the charge go once the answer is written, which
	// may be after this side read it.
	st := budget.Stats()
	for deadline := time.Now().Add(5 * time.Second); st.InUse != 0 && time.Now().Before(deadline); st = budget.Stats() {
		time.Sleep(5 * time.Millisecond)
	}
	if st.Peak < remoteAnswerCopies*int64(len(ans.Read.Batches)) || st.InUse != 0 {
		t.Errorf("after one read served: peak %d bytes charged, %d in use; want at least %d, and 0", st.Peak, st.InUse, remoteAnswerCopies*len(ans.Read.Batches))
	}

	// The budget full (other keys): the read waits, then is refused.
	var held []*membudget.Charge
	for _, k := range []string{"a", "b"} {
		c, err := budget.Acquire(ctx, k, 1<<19, 0)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	ans, err = ask.callGroup(ctx, server.NodeID(), g, read)
	if err != nil || ans.Err == nil || !errors.Is(ans.Err.decode(), backend.ErrOverloaded) {
		t.Fatalf("read with the budget full: %v, %+v; want overloaded", err, ans.Err)
	}
	if st := budget.Stats(); st.Refused != 1 || st.InUse != 1<<20 {
		t.Errorf("with the budget full: %d refused, %d in use; want 1 and %d", st.Refused, st.InUse, 1<<20)
	}
	for _, c := range held {
		c.Release()
	}
	if ans, err = ask.callGroup(ctx, server.NodeID(), g, read); err != nil || ans.Err != nil {
		t.Fatalf("read once the budget has room: %v, %+v", err, ans.Err)
	}
	// As above: released once the answer is written.
	st = budget.Stats()
	for deadline := time.Now().Add(5 * time.Second); st.InUse != 0 && time.Now().Before(deadline); st = budget.Stats() {
		time.Sleep(5 * time.Millisecond)
	}
	if st.InUse != 0 {
		t.Errorf("%d bytes still charged after the reads", st.InUse)
	}
}
