package replication

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/replication/fsm"
)

// dataGroupsView is what the test sees of every node's data groups: per
// group, the voters of its leader's configuration and its leader.
func dataGroupsView(nodes []*Node) (voters map[uint64][]string, leaders map[uint64]string) {
	voters, leaders = map[uint64][]string{}, map[uint64]string{}
	for _, n := range nodes {
		for _, r := range n.DataGroupReplicas() {
			if r.Raft.State() != raft.Leader {
				continue
			}
			leaders[r.ID] = n.NodeID()
			var vs []string
			for _, s := range r.Raft.GetConfiguration().Configuration().Servers {
				if s.Suffrage == raft.Voter {
					vs = append(vs, string(s.ID))
				}
			}
			sort.Strings(vs)
			voters[r.ID] = vs
		}
	}
	return voters, leaders
}

// waitFor polls cond until it holds or ctx ends (then the test fails with
// what describe says).
func waitFor(ctx context.Context, t testing.TB, what string, cond func() bool, describe func() string) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v; %s", what, ctx.Err(), describe())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestDataGroupsFollowJoins: a cluster that starts from one node with two
// data groups per node gets two more groups with each join; once three
// nodes are up every group has three voters (none stays at one replica),
// each node is the preferred leader of two groups and leads them, and
// with one node closed every group still elects a leader and commits.
// A restarted node opens its replicas again from its own state.
func TestDataGroupsFollowJoins(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newJoinCluster(t)
	c.configure = func(_ string, cfg *Config) { cfg.DataGroupsPerNode = 2 }
	l := c.open(ctx, "n1", true)
	nodes := []*Node{l}
	describe := func() string {
		voters, leaders := dataGroupsView(nodes)
		return fmt.Sprintf("table %+v; voters %v; leaders %v", l.FSM().DataGroups(), voters, leaders)
	}
	waitFor(ctx, t, "n1 runs two groups of its own", func() bool {
		voters, _ := dataGroupsView(nodes)
		return len(voters) == 2 && slices.Equal(voters[1], []string{"n1"}) && slices.Equal(voters[2], []string{"n1"})
	}, describe)

	for _, id := range []string{"n2", "n3"} {
		n := c.open(ctx, id, false)
		if err := l.Join(ctx, joinRequest(n), c.probe); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	all := []string{"n1", "n2", "n3"}
	settled := func() bool {
		tab := l.FSM().DataGroups()
		voters, leaders := dataGroupsView(nodes)
		if len(tab.Groups) != 6 || len(voters) != 6 {
			return false
		}
		for _, g := range tab.Groups {
			// Moved, and the move's mark cleared: the table is final.
			if !slices.Equal(voters[g.ID], all) || leaders[g.ID] != g.Replicas[0] || g.Move != nil {
				return false
			}
		}
		return true
	}
	waitFor(ctx, t, "six groups of three voters, each led by its preferred leader, no move marked", settled, describe)
	tab := l.FSM().DataGroups()
	leads := map[string]int{}
	for _, g := range tab.Groups {
		leads[g.Replicas[0]]++
		if !slices.Contains(g.Bootstrap, g.Replicas[0]) && g.ID <= 2 && g.Replicas[0] == "n1" {
			t.Errorf("group %d: %+v", g.ID, g)
		}
	}
	if want := map[string]int{"n1": 2, "n2": 2, "n3": 2}; fmt.Sprint(leads) != fmt.Sprint(want) {
		t.Errorf("preferred leaders per node %v, want %v", leads, want)
	}
	if !slices.Equal(tab.Nodes, all) {
		t.Errorf("placed nodes %v, want %v", tab.Nodes, all)
	}
	// Each node holds a replica of every group, with its own directory.
	for _, n := range nodes {
		if got := len(n.DataGroupReplicas()); got != 6 {
			t.Errorf("%s runs %d replicas, want 6", n.NodeID(), got)
		}
	}

	// Close n3: every group keeps or elects a leader among n1 and n2, and
	// commits an entry.
	c.mu.Lock()
	c.closed[nodes[2]] = true
	c.mu.Unlock()
	c.close(nodes[2])
	live := nodes[:2]
	waitFor(ctx, t, "every group led without n3", func() bool {
		_, leaders := dataGroupsView(live)
		return len(leaders) == 6
	}, describe)
	for _, n := range live {
		for _, r := range n.DataGroupReplicas() {
			if r.Raft.State() == raft.Leader {
				if err := r.Raft.Barrier(10 * time.Second).Error(); err != nil {
					t.Errorf("group %d on %s: barrier without n3: %v", r.ID, n.NodeID(), err)
				}
			}
		}
	}

	// n2 restarts: it opens its six replicas again, and the groups it
	// prefers to lead come back to it.
	n2 := c.restart(nodes[1], nil)
	live = []*Node{l, n2}
	nodes = live
	waitFor(ctx, t, "n2 runs its replicas again and leads its groups", func() bool {
		if len(n2.DataGroupReplicas()) != 6 {
			return false
		}
		_, leaders := dataGroupsView(live)
		for _, g := range tab.Groups {
			if g.Replicas[0] == "n2" && leaders[g.ID] != "n2" {
				return false
			}
		}
		return true
	}, describe)
	if got := l.FSM().DataGroups(); got.Epoch != tab.Epoch {
		t.Errorf("the table changed without a join: %+v, was %+v", got, tab)
	}
}

// TestDataGroupsPlan: plan places the members in configuration order,
// leaves a placed table alone, and skips non-voters (a joiner still
// catching up).
func TestDataGroupsPlan(t *testing.T) {
	srv := func(id string, s raft.ServerSuffrage) raft.Server {
		return raft.Server{ID: raft.ServerID(id), Suffrage: s}
	}
	servers := []raft.Server{srv("a", raft.Voter), srv("b", raft.Voter), srv("c", raft.Nonvoter)}
	set, why, err := plan(fsm.DataGroupTable{}, servers, 2, 3, nil, nil, nil)
	if err != nil || why != "node a joined, node b joined" {
		t.Fatalf("plan: %v, why %q", err, why)
	}
	var rows []string
	for _, g := range set.Groups {
		rows = append(rows, fmt.Sprintf("%d:%s/%s", g.ID, strings.Join(g.Replicas, ","), strings.Join(g.Bootstrap, ",")))
	}
	// a alone makes 1 and 2; b joins both, takes the lead of one, and
	// adds 3 and 4 over both. No group existed before, so each starts
	// with the replicas it ends with.
	if got, want := strings.Join(rows, " "), "1:b,a/b,a 2:a,b/a,b 3:a,b/a,b 4:b,a/b,a"; got != want {
		t.Errorf("plan %s, want %s", got, want)
	}
	if !slices.Equal(set.Nodes, []string{"a", "b"}) {
		t.Errorf("nodes %v", set.Nodes)
	}
	tab := fsm.DataGroupTable{Groups: set.Groups, Nodes: set.Nodes, Epoch: 7}
	again, why, err := plan(tab, servers, 2, 3, nil, nil, nil)
	if err != nil || why != "" || again.Base != 7 {
		t.Errorf("plan of a placed table: why %q, base %d, %v", why, again.Base, err)
	}
	// With placed node b gone from the configuration and c a voter: b's
	// replicas go to c (which also joins and adds its groups), the
	// groups b led get a as preferred leader, and b is no longer placed.
	healed, why, err := plan(tab, []raft.Server{srv("a", raft.Voter), srv("c", raft.Voter)}, 2, 3, nil, nil, nil)
	if err != nil || why != "node b removed, node c joined" || !slices.Equal(healed.Nodes, []string{"a", "c"}) || len(healed.Groups) != 6 {
		t.Fatalf("plan without placed node b: %+v, why %q, %v", healed, why, err)
	}
	for _, g := range healed.Groups {
		if slices.Contains(g.Replicas, "b") || len(g.Replicas) != 2 {
			t.Errorf("group %d after b left: replicas %v, want two, without b", g.ID, g.Replicas)
		}
	}
	for _, i := range []int{0, 3} { // the groups b led
		if healed.Groups[i].Replicas[0] == "b" || !slices.Contains(healed.Groups[i].Replicas, "a") {
			t.Errorf("group %d b led: %v", healed.Groups[i].ID, healed.Groups[i].Replicas)
		}
	}
	// At a factor of 2, b not heard from: with c a voter, b's replicas
	// go to c, b stays placed (it may come back), and c's own groups go
	// to live nodes.
	withC := []raft.Server{srv("a", raft.Voter), srv("b", raft.Voter), srv("c", raft.Voter)}
	evac, why, err := plan(tab, withC, 2, 2, []string{"b"}, []string{"b"}, nil)
	if err != nil || why != "node c joined, node b not heard from" || !slices.Equal(evac.Nodes, []string{"a", "b", "c"}) || len(evac.Groups) != 6 {
		t.Fatalf("plan with b dead: %+v, why %q, %v", evac, why, err)
	}
	for _, g := range evac.Groups {
		if slices.Contains(g.Replicas, "b") {
			t.Errorf("group %d still on b, which is dead: %v", g.ID, g.Replicas)
		}
	}
	// c becomes a voter: it joins every group (below the factor of 3)
	// without changing their bootstrap replicas, and its own two groups
	// start on three nodes.
	servers[2].Suffrage = raft.Voter
	grown, why, err := plan(tab, servers, 2, 3, nil, nil, nil)
	if err != nil || why != "node c joined" || len(grown.Groups) != 6 {
		t.Fatalf("plan after c: %+v, why %q, %v", grown, why, err)
	}
	for i, g := range grown.Groups {
		if len(g.Replicas) != 3 {
			t.Errorf("group %d: replicas %v, want 3", g.ID, g.Replicas)
		}
		if i < 4 && !slices.Equal(g.Bootstrap, set.Groups[i].Bootstrap) {
			t.Errorf("group %d: bootstrap %v, was %v", g.ID, g.Bootstrap, set.Groups[i].Bootstrap)
		}
		if i >= 4 && !slices.Equal(g.Bootstrap, g.Replicas) {
			t.Errorf("new group %d: bootstrap %v, want its replicas %v", g.ID, g.Bootstrap, g.Replicas)
		}
	}
}

// TestMarkMoves: a group whose replicas a new table changes is marked
// with what it gains and loses and why; a later change before it finished
// merges into the mark and keeps its start, changing back too; a group
// left alone keeps its mark, and a new group gets none.
func TestMarkMoves(t *testing.T) {
	tab := fsm.DataGroupTable{Groups: []fsm.DataGroup{
		{ID: 1, Replicas: []string{"a", "b"}},
		{ID: 2, Replicas: []string{"b", "c"}, Move: &fsm.ReplicaMove{Added: []string{"c"}, Removed: []string{"a"}, Reason: "balance", Since: 1}},
	}}
	next := []fsm.DataGroup{
		{ID: 1, Replicas: []string{"a", "c"}},
		{ID: 2, Replicas: []string{"b", "c"}},
		{ID: 3, Replicas: []string{"c", "a"}},
	}
	markMoves(tab, next, "node b drained", 9)
	if m := next[0].Move; m == nil || fmt.Sprint(m.Added, m.Removed) != "[c] [b]" || m.Reason != "node b drained" || m.Since != 9 {
		t.Errorf("group 1: %+v", m)
	}
	if m := next[1].Move; m == nil || m.Since != 1 || m.Reason != "balance" {
		t.Errorf("group 2, left alone: %+v, want its mark kept", m)
	}
	if next[2].Move != nil {
		t.Errorf("new group 3 marked: %+v", next[2].Move)
	}
	// Group 2 changes again (c replaced by d) before it finished: one
	// mark, from its first start; group 1 goes back to a, b.
	tab.Groups = next
	again := []fsm.DataGroup{
		{ID: 1, Replicas: []string{"a", "b"}},
		{ID: 2, Replicas: []string{"b", "d"}},
		{ID: 3, Replicas: []string{"c", "a"}},
	}
	markMoves(tab, again, "node c not heard from", 20)
	// The group may have added c and removed b meanwhile: going back is
	// a move of its own, from the first change's start, until its voters
	// are a and b again (settleMoves clears it then).
	if m := again[0].Move; m == nil || fmt.Sprint(m.Added, m.Removed) != "[b] [c]" || m.Since != 9 {
		t.Errorf("group 1 changed back: %+v", m)
	}
	if m := again[1].Move; m == nil || fmt.Sprint(m.Added, m.Removed) != "[d] [a c]" || m.Since != 1 || m.Reason != "node c not heard from" {
		t.Errorf("group 2 changed again: %+v", m)
	}
}

// dataGroupCluster starts three nodes of a joinCluster configured by
// configure: n1 bootstraps, n2 and n3 join. describe prints the table
// and every node's view of the groups, for a failed wait.
func dataGroupCluster(ctx context.Context, t testing.TB, configure func(*Config)) (*joinCluster, []*Node, func() string) {
	t.Helper()
	return dataGroupClusterOf(ctx, t, func(_ string, cfg *Config) { configure(cfg) })
}

// dataGroupClusterOf is dataGroupCluster with each node's configuration
// edited by its id.
func dataGroupClusterOf(ctx context.Context, t testing.TB, configure func(id string, cfg *Config)) (*joinCluster, []*Node, func() string) {
	t.Helper()
	c := newJoinCluster(t)
	c.configure = configure
	l := c.open(ctx, "n1", true)
	nodes := []*Node{l}
	for _, id := range []string{"n2", "n3"} {
		n := c.open(ctx, id, false)
		if err := l.Join(ctx, joinRequest(n), c.probe); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	describe := func() string {
		voters, leaders := dataGroupsView(nodes)
		return fmt.Sprintf("table %+v; voters %v; leaders %v", l.FSM().DataGroups(), voters, leaders)
	}
	return c, nodes, describe
}

// waitGroupsOfTwo waits until nodes run three data groups of two voters,
// each with a leader (one group per node at a replication factor of 2).
func waitGroupsOfTwo(ctx context.Context, t *testing.T, nodes []*Node, describe func() string) {
	t.Helper()
	waitFor(ctx, t, "three groups of two voters with leaders", func() bool {
		voters, leaders := dataGroupsView(nodes)
		if len(voters) != 3 || len(leaders) != 3 {
			return false
		}
		for _, v := range voters {
			if len(v) != 2 {
				return false
			}
		}
		return true
	}, describe)
}

// TestDataGroupsServeTopics: with data groups, a topic's partitions are
// placed over them; each group adopts its partitions; a produce through
// any node (keyed, explicit and keyless records) is appended by each
// group's leader and answered in the caller's order; every node reads
// every partition from its own replica; with a node closed, produces
// still succeed; a deleted topic is dropped by every group.
func TestDataGroupsServeTopics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, nodes, describe := dataGroupCluster(ctx, t, func(cfg *Config) { cfg.DataGroupsPerNode = 2 })
	l := nodes[0]
	waitFor(ctx, t, "six groups with leaders", func() bool {
		_, leaders := dataGroupsView(nodes)
		return len(l.FSM().DataGroups().Groups) == 6 && len(leaders) == 6
	}, describe)

	b := NewBackend(l)
	if _, err := b.CreateTopic(ctx, backend.CreateTopic{Name: "orders", Partitions: 12}); err != nil {
		t.Fatal(err)
	}
	mt, err := l.FSM().Topic("orders")
	if err != nil || len(mt.Placement) != 12 {
		t.Fatalf("orders: %+v, %v", mt, err)
	}
	if got := len(placementGroups(mt.Placement)); got != 6 {
		t.Errorf("12 partitions over %d groups, want 6: %v", got, mt.Placement)
	}
	// Read at once, before any group may have adopted its partitions:
	// empty partitions, not unknown ones.
	for _, n := range nodes {
		// As a client that created the topic through n1 would carry its
		// applied index (read your writes).
		if err := NewBackend(n).AwaitApplied(ctx, l.FSM().AppliedIndex(), time.Minute); err != nil {
			t.Fatal(err)
		}
		// A replica serves once it caught up with its new group; until
		// one does, a read is NOT_LEADER (the client retries), never an
		// unknown topic.
		for p := range int32(12) {
			var r backend.ReadResult
			var err error
			waitFor(ctx, t, fmt.Sprintf("%s: orders-%d read at once", n.NodeID(), p), func() bool {
				r, err = NewBackend(n).Read("orders", p, 0, 1<<20)
				return !errors.Is(err, backend.ErrNotLeader)
			}, func() string { return fmt.Sprint(err) })
			if err != nil || len(r.Batches) != 0 {
				t.Errorf("%s: orders-%d read at once: %d bytes, %v", n.NodeID(), p, len(r.Batches), err)
			}
			var o backend.Offsets
			waitFor(ctx, t, fmt.Sprintf("%s: orders-%d offsets at once", n.NodeID(), p), func() bool {
				o, err = NewBackend(n).Offsets("orders", p)
				return !errors.Is(err, backend.ErrNotLeader)
			}, func() string { return fmt.Sprint(err) })
			if err != nil || o.End != 0 {
				t.Errorf("%s: orders-%d offsets at once: %+v, %v", n.NodeID(), p, o, err)
			}
		}
	}
	// Every group adopts its partitions on every replica.
	waitFor(ctx, t, "every replica adopts its partitions", func() bool {
		for _, n := range nodes {
			for _, r := range n.DataGroupReplicas() {
				gt, err := r.FSM.Topic("orders")
				if err != nil || gt.CreateIndex != mt.CreateIndex {
					return false
				}
				for p, g := range mt.Placement {
					if _, err := gt.Partition(int32(p)); (err == nil) != (g == r.ID) {
						return false
					}
				}
			}
		}
		return true
	}, describe)

	var recs []backend.ProduceRecord
	for i := range 30 {
		r := backend.ProduceRecord{Value: fmt.Appendf(nil, "v%d", i)}
		switch i % 3 {
		case 0:
			r.Key = fmt.Appendf(nil, "k%d", i)
		case 1:
			r.Partition, r.HasPartition = int32(i%12), true
		}
		recs = append(recs, r)
	}
	produce := func(n *Node, recs []backend.ProduceRecord) backend.ProduceResult {
		t.Helper()
		res, err := NewBackend(n).Produce(ctx, backend.ProduceRequest{Topic: "orders", Records: recs})
		if err != nil {
			t.Fatalf("produce through %s: %v", n.NodeID(), err)
		}
		if len(res.Results) != len(recs) || res.Appended != len(recs) {
			t.Fatalf("produce through %s: %+v", n.NodeID(), res)
		}
		return res
	}
	res := produce(nodes[1], recs)
	// Read your writes through the node written to, at once: it waited
	// for its replicas to apply what the groups' leaders acknowledged.
	for i, r := range res.Results {
		got, err := NewBackend(nodes[1]).Read("orders", r.Partition, r.Offset, 1<<20)
		if err != nil || len(got.Batches) == 0 {
			t.Errorf("record %d, just acknowledged through n2, not read back through n2 at %d@%d: %v", i, r.Partition, r.Offset, err)
		}
	}
	// Each record is where its result says, on every node.
	check := func(live []*Node, recs []backend.ProduceRecord, res backend.ProduceResult) {
		t.Helper()
		for i, r := range res.Results {
			want := recs[i]
			if want.HasPartition && r.Partition != want.Partition {
				t.Errorf("record %d went to partition %d, asked %d", i, r.Partition, want.Partition)
			}
			for _, n := range live {
				var got backend.ReadResult
				waitFor(ctx, t, fmt.Sprintf("%s applies record %d", n.NodeID(), i), func() bool {
					var err error
					got, err = NewBackend(n).Read("orders", r.Partition, r.Offset, 1<<20)
					return err == nil && len(got.Batches) > 0
				}, describe)
				bs, err := batch.DecodeAll(got.Batches)
				if err != nil {
					t.Fatal(err)
				}
				found := false
				for _, bt := range bs {
					for _, d := range bt.Records {
						if d.Offset == r.Offset {
							found = string(d.Value) == string(want.Value)
						}
					}
				}
				if !found {
					t.Errorf("%s: record %d not at %d@%d", n.NodeID(), i, r.Partition, r.Offset)
				}
			}
		}
	}
	check(nodes, recs, res)
	// A keyless call stays in one group.
	var keyless []backend.ProduceRecord
	for i := range 8 {
		keyless = append(keyless, backend.ProduceRecord{Value: fmt.Appendf(nil, "kl%d", i)})
	}
	kres := produce(nodes[2], keyless)
	groups := map[uint64]bool{}
	for _, r := range kres.Results {
		groups[mt.Placement[r.Partition]] = true
	}
	if len(groups) != 1 {
		t.Errorf("a keyless call spread over groups %v", groups)
	}
	check(nodes, keyless, kres)

	// A damaged batch appended through any node to any partition is
	// refused (by the proposer of the node leading the partition's group,
	// or by its state machine), typed, and nothing of the call is written:
	// a node that receives an append from another checks it whole,
	// whatever the sender checked.
	good := mustBatch(t, "good")
	damaged := append([]byte(nil), good...)
	damaged[len(damaged)-2] ^= 0x10
	for _, n := range nodes {
		for _, verified := range []bool{false, true} {
			for p := range int32(12) {
				before, err := NewBackend(n).Offsets("orders", p)
				if err != nil {
					t.Fatal(err)
				}
				_, err = NewBackend(n).Append(ctx, backend.Append{Topic: "orders", Verified: verified, Batches: []backend.PartitionBatch{{Partition: p, Batch: damaged}}})
				if !errors.Is(err, backend.ErrInvalidArgument) {
					t.Fatalf("%s, verified %v: a damaged batch for orders-%d: %v, want backend.ErrInvalidArgument", n.NodeID(), verified, p, err)
				}
				if after, err := NewBackend(n).Offsets("orders", p); err != nil || after.End != before.End {
					t.Fatalf("%s: orders-%d ends at %d after the refusal, %d before (%v)", n.NodeID(), p, after.End, before.End, err)
				}
			}
		}
	}

	// Growth: the old partitions stay where they are, the new ones are
	// placed over the groups and adopted; a record to one is served.
	if _, err := b.CreatePartitions(ctx, backend.CreatePartitions{Name: "orders", Count: 14}); err != nil {
		t.Fatal(err)
	}
	grown, _ := l.FSM().Topic("orders")
	if len(grown.Placement) != 14 || !slices.Equal(grown.Placement[:12], mt.Placement) {
		t.Fatalf("grown placement %v, was %v", grown.Placement, mt.Placement)
	}
	more := []backend.ProduceRecord{{Partition: 13, HasPartition: true, Value: []byte("p13")}}
	waitFor(ctx, t, "the new partition's group adopts it", func() bool {
		for _, n := range nodes {
			if f, err := n.partitionFSM("orders", 13); err != nil {
				return false
			} else if _, err := f.Partition("orders", 13); err != nil {
				return false
			}
		}
		return true
	}, describe)
	check(nodes, more, produce(nodes[0], more))

	// Close n3: produces through n1 and n2 still succeed.
	c.mu.Lock()
	c.closed[nodes[2]] = true
	c.mu.Unlock()
	c.close(nodes[2])
	live := nodes[:2]
	res = produce(nodes[1], recs)
	check(live, recs, res)

	// The topic deleted: every live replica drops it.
	if err := b.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "every replica drops the deleted topic", func() bool {
		for _, n := range live {
			for _, r := range n.DataGroupReplicas() {
				if _, err := r.FSM.Topic("orders"); err == nil {
					return false
				}
			}
		}
		return true
	}, describe)
}

// TestDataGroupsReadElsewhere: with a replication factor of 2 over three
// nodes, each node lacks a replica of some group; a produce through any
// node reaches the group's leader, and a read of any partition through
// any node is answered, by a replica of its group when the node holds
// none.
func TestDataGroupsReadElsewhere(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, nodes, describe := dataGroupCluster(ctx, t, func(cfg *Config) { cfg.DataGroupsPerNode, cfg.ReplicationFactor = 1, 2 })
	l := nodes[0]
	waitGroupsOfTwo(ctx, t, nodes, describe)
	lacking := 0
	for _, n := range nodes {
		if len(n.DataGroupReplicas()) < 3 {
			lacking++
		}
	}
	if lacking == 0 {
		t.Fatalf("every node holds every group: %s", describe())
	}
	if _, err := NewBackend(l).CreateTopic(ctx, backend.CreateTopic{Name: "far", Partitions: 6}); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		var recs []backend.ProduceRecord
		for p := range int32(6) {
			recs = append(recs, backend.ProduceRecord{Partition: p, HasPartition: true, Value: []byte(n.NodeID())})
		}
		// A client that created the topic through n1 would carry n1's
		// applied index to n (read your writes); here, n applies it.
		if err := NewBackend(n).AwaitApplied(ctx, l.FSM().AppliedIndex(), time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := NewBackend(n).Produce(ctx, backend.ProduceRequest{Topic: "far", Records: recs}); err != nil {
			t.Fatalf("produce through %s: %v", n.NodeID(), err)
		}
	}
	for _, n := range nodes {
		for p := range int32(6) {
			var got backend.ReadResult
			waitFor(ctx, t, fmt.Sprintf("%s reads far-%d", n.NodeID(), p), func() bool {
				var err error
				got, err = NewBackend(n).Read("far", p, 0, 1<<20)
				return err == nil && got.EndOffset == 3
			}, describe)
			bs, err := batch.DecodeAll(got.Batches)
			if err != nil || len(bs) != 3 {
				t.Errorf("%s: far-%d: %d batches, %v", n.NodeID(), p, len(bs), err)
			}
			// A read that finds no replica it reaches at what n answered
			// before (n's own replica may learn the last commit from its
			// leader's next append) is refused as behind, which a client
			// sends again (docs/architecture.md, "Read guarantees").
			bk := behindRetrying{ctx: ctx, b: NewBackend(n)}
			// Bounded by a record count, here or at a replica of the
			// group: the batch holding it, not the three.
			if r, err := bk.ReadRecords("far", p, 0, 1<<20, 1); err != nil || r.EndOffset != 3 {
				t.Errorf("%s: far-%d read of one record: end %d, %v", n.NodeID(), p, r.EndOffset, err)
			} else if bs, err := batch.DecodeAll(r.Batches); err != nil || len(bs) != 1 {
				t.Errorf("%s: far-%d read of one record: %d batches, %v", n.NodeID(), p, len(bs), err)
			}
			if o, err := bk.Offsets("far", p); err != nil || o.End != 3 || o.LogStart != 0 {
				t.Errorf("%s: far-%d offsets %+v, %v", n.NodeID(), p, o, err)
			}
			if off, err := bk.OffsetForTime("far", p, 0); err != nil || off != 0 {
				t.Errorf("%s: far-%d offset for time 0: %d, %v", n.NodeID(), p, off, err)
			}
			if off, err := bk.OffsetForTime("far", p, time.Now().Add(time.Hour).UnixMilli()); err != nil || off != 3 {
				t.Errorf("%s: far-%d offset for a time ahead: %d, %v; want the end, 3", n.NodeID(), p, off, err)
			}
			// A consistent read: the group's leader answers it, at once
			// holding every acknowledged write.
			if r, err := NewBackend(n).ReadLeader(ctx, "far", p, 0, 1<<20); err != nil || r.EndOffset != 3 {
				t.Errorf("%s: far-%d read at the leader: end %d, %v", n.NodeID(), p, r.EndOffset, err)
			}
			if o, err := NewBackend(n).OffsetsLeader(ctx, "far", p); err != nil || o.End != 3 {
				t.Errorf("%s: far-%d bounds at the leader: %+v, %v", n.NodeID(), p, o, err)
			}
			// A consumer group's lag, from a replica of the group when
			// n holds none.
			if lag, err := bk.GroupLag("far", p, 1, time.Now()); err != nil || lag.End != 3 || lag.Records != 2 || lag.Seconds <= 0 {
				t.Errorf("%s: far-%d lag at 1: %+v, %v; want 2 records to an end of 3, with an age", n.NodeID(), p, lag, err)
			}
		}
	}

	// Consumer groups over the placed topic: their state is in their
	// homes (data groups, docs/architecture.md, "Consumer groups"), and
	// each offset is bounded by its partition's end, read from its data
	// group (remotely for a group the home's leader holds no replica of).
	b := NewBackend(l)
	a, err := b.JoinGroup(ctx, backend.GroupJoin{Group: "billing", Member: "m1", Topics: []string{"far"}, SessionTimeoutMs: 60000})
	if err != nil || len(a.Partitions) != 6 {
		t.Fatalf("join over a placed topic: %+v, %v", a, err)
	}
	var at3 []group.OffsetCommit
	for p := range int32(6) {
		at3 = append(at3, group.OffsetCommit{TopicPartition: group.TopicPartition{Topic: "far", Partition: p}, Offset: 3})
	}
	if err := b.CommitGroupOffsets(ctx, backend.GroupCommit{Group: "billing", Member: "m1", Generation: a.Generation, Offsets: at3}); err != nil {
		t.Fatalf("commit at every partition's end: %v", err)
	}
	above := []group.OffsetCommit{{TopicPartition: group.TopicPartition{Topic: "far", Partition: 5}, Offset: 4}}
	if err := b.CommitGroupOffsets(ctx, backend.GroupCommit{Group: "billing", Member: "m1", Generation: a.Generation, Offsets: above}); !errors.Is(err, group.ErrOffsetAboveEnd) {
		t.Errorf("commit above the end: %v, want ErrOffsetAboveEnd", err)
	}
	// A Kafka group's commit (coordinated outside the state machine).
	if err := b.SetGroupOffsets(ctx, backend.GroupSetOffsets{Group: "kbilling", Fence: group.NoFence, Offsets: at3}); err != nil {
		t.Fatalf("a Kafka group's commit: %v", err)
	}
	if err := b.SetGroupOffsets(ctx, backend.GroupSetOffsets{Group: "kbilling", Fence: group.NoFence, Offsets: above}); !errors.Is(err, group.ErrOffsetAboveEnd) {
		t.Errorf("a Kafka group's commit above the end: %v, want ErrOffsetAboveEnd", err)
	}
	for _, name := range []string{"billing", "kbilling"} {
		g, err := b.ConsumerGroup(name)
		if err != nil {
			t.Fatal(err)
		}
		for p, cp := range g.Topics["far"].Partitions {
			if cp.Committed != 3 {
				t.Errorf("%s: far-%d committed %d, want 3", name, p, cp.Committed)
			}
		}
	}
}

// TestDataGroupLosesQuorumAlone: with a replication factor of 2 over
// three nodes, closing one node leaves each group it held without a
// majority: produces to those groups' partitions fail (NOT_LEADER, or an
// unknown outcome), while the group it did not hold, and the meta group,
// go on accepting writes.
func TestDataGroupLosesQuorumAlone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, nodes, describe := dataGroupCluster(ctx, t, func(cfg *Config) {
		cfg.DataGroupsPerNode, cfg.ReplicationFactor = 1, 2
		cfg.ApplyTimeout = 2 * time.Second
	})
	l := nodes[0]
	waitGroupsOfTwo(ctx, t, nodes, describe)
	if _, err := NewBackend(l).CreateTopic(ctx, backend.CreateTopic{Name: "q", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	mt, _ := l.FSM().Topic("q")
	// Every group adopts its partition (the first produce has it adopt).
	for p := range int32(3) {
		if _, err := NewBackend(l).Produce(ctx, backend.ProduceRequest{Topic: "q", Records: []backend.ProduceRecord{{Partition: p, HasPartition: true, Value: []byte("before")}}}); err != nil {
			t.Fatal(err)
		}
	}
	// The victim: a node other than n1 (the meta leader, which must stay).
	victim := nodes[2]
	tab := l.FSM().DataGroups()
	held := map[uint64]bool{}
	for _, g := range tab.Groups {
		held[g.ID] = slices.Contains(g.Replicas, victim.NodeID())
	}
	c.mu.Lock()
	c.closed[victim] = true
	c.mu.Unlock()
	c.close(victim)
	b := NewBackend(l)
	stopped, going := 0, 0
	for p, g := range mt.Placement {
		rec := []backend.ProduceRecord{{Partition: int32(p), HasPartition: true, Value: []byte("after")}}
		if held[g] {
			pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
			_, err := b.Produce(pctx, backend.ProduceRequest{Topic: "q", Records: rec})
			pcancel()
			if err == nil {
				t.Errorf("q-%d in group %d, which lost %s of its two replicas, took a write", p, g, victim.NodeID())
			} else if !errors.Is(err, backend.ErrNotLeader) && !errors.Is(err, backend.ErrTimeout) {
				t.Errorf("q-%d: %v, want NOT_LEADER or an unknown outcome", p, err)
			}
			stopped++
			continue
		}
		var err error
		waitFor(ctx, t, fmt.Sprintf("q-%d in group %d, which kept its replicas, takes a write", p, g), func() bool {
			_, err = b.Produce(ctx, backend.ProduceRequest{Topic: "q", Records: rec})
			return err == nil
		}, func() string { return fmt.Sprint(err) })
		going++
	}
	if stopped == 0 || going == 0 {
		t.Fatalf("placement %v over groups %v: %d partitions stopped, %d going; the test needs both", mt.Placement, held, stopped, going)
	}
	// The meta group has its majority: a topic can still be created.
	if _, err := b.CreateTopic(ctx, backend.CreateTopic{Name: "meta-still", Partitions: 1}); err != nil {
		t.Errorf("the meta group refused a topic without one node: %v", err)
	}
}

// TestDataGroupsHealOnRemove: with a replication factor of 2 over three
// nodes, removing n3 from the cluster moves its replicas to the nodes
// that remain: each group it held gains the other node (added, caught up,
// promoted) and then loses n3, and every record written before is read
// back from both remaining nodes' own replicas.
func TestDataGroupsHealOnRemove(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, nodes, describe := dataGroupCluster(ctx, t, func(cfg *Config) { cfg.DataGroupsPerNode, cfg.ReplicationFactor = 1, 2 })
	l := nodes[0]
	waitGroupsOfTwo(ctx, t, nodes, describe)
	b := NewBackend(l)
	fillTopic(ctx, t, b, "kept", 6, 10)
	if err := l.RemoveNode(ctx, "n3"); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "n3's replicas moved to n1 and n2", func() bool {
		tab := l.FSM().DataGroups()
		if slices.Contains(tab.Nodes, "n3") {
			return false
		}
		for _, g := range tab.Groups {
			if slices.Contains(g.Replicas, "n3") {
				return false
			}
		}
		voters, leaders := dataGroupsView(nodes[:2])
		if len(leaders) != 3 {
			return false
		}
		for _, vs := range voters {
			if !slices.Equal(vs, []string{"n1", "n2"}) {
				return false
			}
		}
		return true
	}, describe)
	c.close(nodes[2])
	c.mu.Lock()
	c.closed[nodes[2]] = true
	c.mu.Unlock()
	for _, n := range nodes[:2] {
		for p := range int32(6) {
			waitOwnReplica(ctx, t, n, "kept", p, 10, describe)
		}
	}
}

// TestDataGroupsBalanceOnJoin: three nodes hold six groups of two
// replicas (four each); a fourth node joins, gets the two groups it adds,
// and then replicas move to it one at a time (each added, caught up,
// promoted, then dropped from its old node) until the counts are within
// two; a partition of a moved group is then read from the new node's own
// replica with every record written before.
func TestDataGroupsBalanceOnJoin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, nodes, describe := dataGroupCluster(ctx, t, func(cfg *Config) { cfg.DataGroupsPerNode, cfg.ReplicationFactor = 2, 2 })
	l := nodes[0]
	waitFor(ctx, t, "six groups of two voters", func() bool {
		voters, leaders := dataGroupsView(nodes)
		if len(voters) != 6 || len(leaders) != 6 {
			return false
		}
		for _, vs := range voters {
			if len(vs) != 2 {
				return false
			}
		}
		return true
	}, describe)
	b := NewBackend(l)
	fillTopic(ctx, t, b, "before", 12, 10)
	before := l.FSM().DataGroups()
	n4 := c.open(ctx, "n4", false)
	if err := l.Join(ctx, joinRequest(n4), c.probe); err != nil {
		t.Fatal(err)
	}
	nodes = append(nodes, n4)
	counts := func(tab fsm.DataGroupTable) map[string]int {
		out := map[string]int{}
		for _, g := range tab.Groups {
			for _, r := range g.Replicas {
				out[r]++
			}
		}
		return out
	}
	waitFor(ctx, t, "n4 takes its share and every group settles", func() bool {
		tab := l.FSM().DataGroups()
		cs := counts(tab)
		lo, hi := cs["n1"], cs["n1"]
		for _, id := range []string{"n1", "n2", "n3", "n4"} {
			lo, hi = min(lo, cs[id]), max(hi, cs[id])
		}
		if len(tab.Groups) != 8 || hi-lo > 2 || cs["n4"] < 3 {
			return false
		}
		voters, leaders := dataGroupsView(nodes)
		if len(leaders) != 8 {
			return false
		}
		for _, g := range tab.Groups {
			if !slices.Equal(voters[g.ID], slices.Sorted(slices.Values(g.Replicas))) {
				return false
			}
		}
		return true
	}, describe)
	// A group of the first six now on n4 moved there: its partitions of
	// "before" are whole in n4's replica.
	mt, _ := l.FSM().Topic("before")
	after := l.FSM().DataGroups()
	moved := 0
	for i, g := range after.Groups[:6] {
		if slices.Contains(before.Groups[i].Replicas, "n4") || !slices.Contains(g.Replicas, "n4") {
			continue
		}
		moved++
		for p, pg := range mt.Placement {
			if pg != g.ID {
				continue
			}
			waitOwnReplica(ctx, t, n4, "before", int32(p), 10, describe)
		}
	}
	if moved == 0 {
		t.Fatalf("no replica of the first six groups moved to n4: before %+v, after %+v", before.Groups, after.Groups)
	}
}

// TestDataGroupsHealDeadNode: four nodes, four groups of three replicas;
// n4 stops, and once the meta leader has not heard from it for the dead
// node timeout, its replicas go to the others (added, caught up,
// promoted, n4 dropped) while n4 stays a member; every record written
// before is in the remaining replicas.
func TestDataGroupsHealDeadNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, nodes, describe := fourNodeGroups(ctx, t, 2*time.Second)
	l, n4 := nodes[0], nodes[3]
	held := func() bool { return holds(l, "n4") }
	b := NewBackend(l)
	fillTopic(ctx, t, b, "kept", 8, 10)
	c.close(n4)
	c.mu.Lock()
	c.closed[n4] = true
	c.mu.Unlock()
	live := nodes[:3]
	waitFor(ctx, t, "n4's replicas rebuilt on the others", func() bool {
		tab := l.FSM().DataGroups()
		if held() || !slices.Contains(tab.Nodes, "n4") {
			return false
		}
		voters, leaders := dataGroupsView(live)
		if len(leaders) != 4 {
			return false
		}
		for _, g := range tab.Groups {
			if !slices.Equal(voters[g.ID], slices.Sorted(slices.Values(g.Replicas))) {
				return false
			}
		}
		return true
	}, describe)
	for p := range int32(8) {
		if o, err := b.OffsetsLeader(ctx, "kept", p); err != nil || o.End != 10 {
			t.Errorf("kept-%d after the heal: %+v, %v; want 10 records", p, o, err)
		}
	}
	if l.FSM().DataGroups().Epoch == 0 {
		t.Fatal("no table")
	}
}

// fourNodeGroups starts four nodes with four data groups of three
// replicas (a dead node timeout of dead) and waits until every group's
// voters are its replicas.
func fourNodeGroups(ctx context.Context, t *testing.T, dead time.Duration) (*joinCluster, []*Node, func() string) {
	t.Helper()
	return fourNodeGroupsWith(ctx, t, func(cfg *Config) { cfg.DeadNodeTimeout = dead })
}

// fourNodeGroupsWith is fourNodeGroups with each node's configuration as
// edit changes it.
func fourNodeGroupsWith(ctx context.Context, t *testing.T, edit func(*Config)) (*joinCluster, []*Node, func() string) {
	t.Helper()
	c, nodes, describe := dataGroupCluster(ctx, t, func(cfg *Config) {
		cfg.DataGroupsPerNode, cfg.ReplicationFactor = 1, 3
		edit(cfg)
	})
	l := nodes[0]
	n4 := c.open(ctx, "n4", false)
	if err := l.Join(ctx, joinRequest(n4), c.probe); err != nil {
		t.Fatal(err)
	}
	nodes = append(nodes, n4)
	waitGroupsSettled(ctx, t, l, nodes, 4, describe)
	if !holds(l, "n4") {
		t.Fatalf("n4 holds no replica: %s", describe())
	}
	return c, nodes, describe
}

// holds reports whether the table l holds places a replica on node id.
func holds(l *Node, id string) bool {
	for _, g := range l.FSM().DataGroups().Groups {
		if slices.Contains(g.Replicas, id) {
			return true
		}
	}
	return false
}

// waitGroupsSettled waits until the table l holds has groups groups, each
// led, with its replicas as its voters, as nodes see them.
func waitGroupsSettled(ctx context.Context, t testing.TB, l *Node, nodes []*Node, groups int, describe func() string) {
	t.Helper()
	waitFor(ctx, t, "every group led, its voters its replicas", func() bool {
		tab := l.FSM().DataGroups()
		voters, leaders := dataGroupsView(nodes)
		if len(tab.Groups) != groups || len(leaders) != groups {
			return false
		}
		for _, g := range tab.Groups {
			if !slices.Equal(voters[g.ID], slices.Sorted(slices.Values(g.Replicas))) {
				return false
			}
		}
		return true
	}, describe)
}

// TestDataGroupsDrain: draining n2 of four nodes gives its replicas and
// preferred leaderships to the other three while it stays a member and
// keeps serving (a read through it answers); ending the drain gives it
// replicas again by balancing. A node that is not placed is refused.
func TestDataGroupsDrain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, nodes, describe := fourNodeGroups(ctx, t, 0)
	l, n2 := nodes[0], nodes[1]
	b := NewBackend(l)
	fillTopic(ctx, t, b, "kept", 8, 10)
	if _, err := l.DrainNode(ctx, "n9", false); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("draining a node that is not placed: %v", err)
	}
	draining, err := l.DrainNode(ctx, "n2", false)
	if err != nil || !slices.Equal(draining, []string{"n2"}) {
		t.Fatalf("drain n2: %v, %v", draining, err)
	}
	// The groups that held n2 are marked moving, for the drain, until
	// their voters are their replicas; then the marks are cleared.
	var marked []string
	waitFor(ctx, t, "n2 drained", func() bool {
		for _, g := range l.FSM().DataGroups().Groups {
			if m := g.Move; m != nil && !slices.Contains(marked, m.Reason) {
				marked = append(marked, m.Reason)
			}
		}
		return !holds(l, "n2")
	}, describe)
	waitGroupsSettled(ctx, t, l, nodes, 4, describe)
	waitFor(ctx, t, "every move's mark cleared", func() bool {
		return !slices.ContainsFunc(l.FSM().DataGroups().Groups, func(g fsm.DataGroup) bool { return g.Move != nil })
	}, describe)
	if !slices.Contains(marked, "node n2 drained") {
		t.Errorf("moves marked for %q, none for the drain of n2", marked)
	}
	if tab := l.FSM().DataGroups(); !slices.Contains(tab.Nodes, "n2") || !slices.Equal(tab.Draining, []string{"n2"}) {
		t.Fatalf("the table after the drain: %+v", tab)
	}
	if err := NewBackend(n2).AwaitApplied(ctx, l.FSM().AppliedIndex(), time.Minute); err != nil {
		t.Fatal(err)
	}
	for p := range int32(8) {
		waitFor(ctx, t, fmt.Sprintf("kept-%d read through the drained n2", p), func() bool {
			o, err := NewBackend(n2).Offsets("kept", p)
			return err == nil && o.End == 10
		}, describe)
	}
	if draining, err := l.DrainNode(ctx, "n2", true); err != nil || len(draining) != 0 {
		t.Fatalf("end the drain: %v, %v", draining, err)
	}
	waitFor(ctx, t, "n2 takes replicas again", func() bool { return holds(l, "n2") }, describe)
	waitGroupsSettled(ctx, t, l, nodes, 4, describe)
}

// fillTopic creates topic with parts partitions through b and writes per
// records to each ("v0", "v1", ... round robin over the partitions).
func fillTopic(ctx context.Context, t *testing.T, b *Backend, topic string, parts, per int) {
	t.Helper()
	if _, err := b.CreateTopic(ctx, backend.CreateTopic{Name: topic, Partitions: int32(parts)}); err != nil {
		t.Fatal(err)
	}
	var recs []backend.ProduceRecord
	for i := range parts * per {
		recs = append(recs, backend.ProduceRecord{Partition: int32(i % parts), HasPartition: true, Value: fmt.Appendf(nil, "v%d", i)})
	}
	if _, err := b.Produce(ctx, backend.ProduceRequest{Topic: topic, Records: recs}); err != nil {
		t.Fatal(err)
	}
}

// waitOwnReplica waits until n's own replica of the partition's data
// group holds it up to end.
func waitOwnReplica(ctx context.Context, t *testing.T, n *Node, topic string, p int32, end int64, describe func() string) {
	t.Helper()
	waitFor(ctx, t, fmt.Sprintf("%s's own replica holds %s-%d", n.NodeID(), topic, p), func() bool {
		f, err := n.partitionFSM(topic, p)
		if err != nil || f == n.fsm {
			return false
		}
		part, err := f.Partition(topic, p)
		return err == nil && part.Log().EndOffset() == end
	}, describe)
}

// TestBalanceCountsMarkedMoves: balancing starts no move while the table
// marks as many as --max-moves allows, whoever marked them (a meta leader
// before this one: the marks are replicated state), and marks the move it
// starts, of another group, once they are fewer; switched off, it moves
// nothing.
func TestBalanceCountsMarkedMoves(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// No data groups of their own: the runner leaves the table to the
	// test.
	open := func(maxMoves int) *Node {
		n := openSingleNode(t, ctx, Config{DataDir: t.TempDir(), ReplicationFactor: 2, MaxMoves: maxMoves})
		t.Cleanup(func() { n.Close() })
		return n
	}
	// a and b hold four replicas each, c none: more than balanceSlack
	// apart, so balancing moves one; the first marked ones are moving.
	propose := func(n *Node, marked int) uint64 {
		t.Helper()
		var groups []fsm.DataGroup
		for id := range uint64(4) {
			g := fsm.DataGroup{ID: id + 1, Replicas: []string{"a", "b"}, Bootstrap: []string{"a", "b"}}
			if int(id) < marked {
				g.Move = &fsm.ReplicaMove{Added: []string{"b"}, Reason: "node b joined", Since: n.cfg.Now().UnixNano()}
			}
			groups = append(groups, g)
		}
		tab := n.fsm.DataGroups()
		data, err := fsm.EncodeDataGroups(n.cfg.Now().UnixNano(), fsm.DataGroupsSet{Base: tab.Epoch, Groups: groups, Nodes: []string{"a", "b", "c"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.propose(ctx, data); err != nil {
			t.Fatal(err)
		}
		return n.fsm.DataGroups().Epoch
	}
	n := open(2)
	epoch := propose(n, 2)
	if err := n.data.balance(n.fsm.DataGroups(), nil); err != nil || n.fsm.DataGroups().Epoch != epoch {
		t.Fatalf("balancing moved a replica while the table marks two moves (max 2): %v, %+v", err, n.fsm.DataGroups())
	}
	epoch = propose(n, 1)
	if err := n.data.balance(n.fsm.DataGroups(), nil); err != nil {
		t.Fatal(err)
	}
	tab := n.fsm.DataGroups()
	var moving []string
	for _, g := range tab.Groups {
		if g.Move != nil {
			moving = append(moving, fmt.Sprintf("%d:%s", g.ID, g.Move.Reason))
		}
	}
	if tab.Epoch == epoch || len(moving) != 2 || moving[0] != "1:node b joined" || !strings.HasSuffix(moving[1], ":balance") {
		t.Fatalf("with one of two moves in flight: moving %v, table %+v", moving, tab)
	}
	off := open(-1)
	epoch = propose(off, 0)
	if err := off.data.balance(off.fsm.DataGroups(), nil); err != nil || off.fsm.DataGroups().Epoch != epoch {
		t.Fatalf("balancing off moved a replica: %v, %+v", err, off.fsm.DataGroups())
	}
}

// behindRetrying reads through b and sends a read refused as behind
// (backend.ErrBehind: no replica the node reached has applied what it
// answered before, yet) again until it is answered or ctx ends, as a
// client does.
type behindRetrying struct {
	ctx context.Context
	b   *Backend
}

func retryBehind[T any](ctx context.Context, read func() (T, error)) (T, error) {
	for {
		v, err := read()
		if !errors.Is(err, backend.ErrBehind) || ctx.Err() != nil {
			return v, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r behindRetrying) ReadRecords(topic string, p int32, offset int64, maxBytes, maxRecords int) (backend.ReadResult, error) {
	return retryBehind(r.ctx, func() (backend.ReadResult, error) { return r.b.ReadRecords(topic, p, offset, maxBytes, maxRecords) })
}

func (r behindRetrying) Offsets(topic string, p int32) (backend.Offsets, error) {
	return retryBehind(r.ctx, func() (backend.Offsets, error) { return r.b.Offsets(topic, p) })
}

func (r behindRetrying) OffsetForTime(topic string, p int32, ms int64) (int64, error) {
	return retryBehind(r.ctx, func() (int64, error) { return r.b.OffsetForTime(topic, p, ms) })
}

func (r behindRetrying) GroupLag(topic string, p int32, committed int64, now time.Time) (backend.Lag, error) {
	return retryBehind(r.ctx, func() (backend.Lag, error) { return r.b.GroupLag(topic, p, committed, now) })
}
