package replication

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
)

// TestDataGroupsBalanceBytes: with replica counts even (two groups of one
// replica per node), the two groups n1 holds get 2 MiB each and the
// others stay empty; the meta leader learns the groups' sizes (its own
// replicas', the others' over the Raft port) and moves one of n1's full
// groups to another node, which then holds all of its records, and the
// dry run shows the nodes' bytes.
func TestDataGroupsBalanceBytes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, nodes, describe := dataGroupCluster(ctx, t, func(cfg *Config) { cfg.DataGroupsPerNode, cfg.ReplicationFactor = 2, 1 })
	l := nodes[0]
	perNode := func(tab fsm.DataGroupTable) map[string][]uint64 {
		out := map[string][]uint64{}
		for _, g := range tab.Groups {
			for _, r := range g.Replicas {
				out[r] = append(out[r], g.ID)
			}
		}
		return out
	}
	settled := func() bool {
		tab := l.FSM().DataGroups()
		voters, leaders := dataGroupsView(nodes)
		if len(tab.Groups) != 6 || len(leaders) != 6 {
			return false
		}
		for _, g := range tab.Groups {
			if g.Move != nil || !slices.Equal(voters[g.ID], slices.Sorted(slices.Values(g.Replicas))) {
				return false
			}
		}
		return true
	}
	waitFor(ctx, t, "six groups of one replica, two per node, settled", func() bool {
		pn := perNode(l.FSM().DataGroups())
		return settled() && len(pn["n1"]) == 2 && len(pn["n2"]) == 2 && len(pn["n3"]) == 2
	}, describe)
	full := perNode(l.FSM().DataGroups())["n1"]
	b := NewBackend(l)
	if _, err := b.CreateTopic(ctx, backend.CreateTopic{Name: "sized", Partitions: 6}); err != nil {
		t.Fatal(err)
	}
	st, err := l.FSM().Topic("sized")
	if err != nil {
		t.Fatal(err)
	}
	const recs, size = 32, 64 << 10
	value := make([]byte, size)
	for p, g := range st.Placement {
		if !slices.Contains(full, g) {
			continue
		}
		for range recs / 8 {
			batch := make([]backend.ProduceRecord, 8)
			for i := range batch {
				batch[i] = backend.ProduceRecord{Partition: int32(p), HasPartition: true, Value: value}
			}
			if _, err := b.Produce(ctx, backend.ProduceRequest{Topic: "sized", Records: batch}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var moved uint64
	waitFor(ctx, t, "one of n1's two full groups moved to another node", func() bool {
		for _, g := range l.FSM().DataGroups().Groups {
			if slices.Contains(full, g.ID) && !slices.Contains(g.Replicas, "n1") {
				moved = g.ID
			}
		}
		return moved != 0 && settled()
	}, describe)
	var to *Node
	for _, g := range l.FSM().DataGroups().Groups {
		if g.ID == moved {
			to = nodes[slices.IndexFunc(nodes, func(n *Node) bool { return n.NodeID() == g.Replicas[0] })]
		}
	}
	for p, g := range st.Placement {
		if g == moved {
			waitOwnReplica(ctx, t, to, "sized", int32(p), recs, describe)
		}
	}
	if pn := perNode(l.FSM().DataGroups()); slices.Contains(pn["n1"], moved) || len(pn["n1"]) != 1 {
		t.Errorf("n1 holds %v after the move of group %d", pn["n1"], moved)
	}
	plan, err := l.PlanBalance()
	if err != nil {
		t.Fatal(err)
	}
	var n1Bytes int64
	for _, ld := range plan.Loads {
		if ld.Node == "n1" {
			n1Bytes = ld.BytesBefore
		}
	}
	if n1Bytes < recs*size || n1Bytes > 2*recs*size {
		t.Errorf("the dry run gives n1 %d bytes, want one full group's (about %d): %+v", n1Bytes, recs*size, plan.Loads)
	}
	t.Logf("group %d moved from n1 to %s; plan: %s", moved, to.NodeID(), fmt.Sprint(plan.Loads))
}
