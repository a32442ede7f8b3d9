package replication

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
)

// TestBalancePlan: from a table, the plan is what placement.Balance would
// do pass after pass, with the hand-overs of preferred leaderships each
// pass makes, the counts before and after, and why balancing waits when
// the meta leader has other changes to make first.
func TestBalancePlan(t *testing.T) {
	voters := func(ids ...string) []raft.Server {
		var out []raft.Server
		for _, id := range ids {
			out = append(out, raft.Server{ID: raft.ServerID(id), Suffrage: raft.Voter})
		}
		return out
	}
	group := func(id uint64, replicas ...string) fsm.DataGroup {
		return fsm.DataGroup{ID: id, Replicas: replicas, Bootstrap: replicas}
	}
	// d joined a cluster whose groups were all at their factor: it holds
	// nothing, a holds four and leads two.
	uneven := fsm.DataGroupTable{Nodes: []string{"a", "b", "c", "d"}, Groups: []fsm.DataGroup{
		group(1, "a", "b", "c"), group(2, "b", "c", "a"), group(3, "c", "a", "b"), group(4, "a", "b", "c"),
	}}
	withDrain := func(tab fsm.DataGroupTable, drain ...string) fsm.DataGroupTable {
		tab.Draining = drain
		return tab
	}
	moving := uneven
	moving.Groups = slices.Clone(uneven.Groups)
	moving.Groups[2].Move = &fsm.ReplicaMove{Added: []string{"a"}, Reason: "balance", Since: 1}
	tests := []struct {
		name     string
		tab      fsm.DataGroupTable
		servers  []raft.Server
		maxSteps int
		// steps are "step kind group from>to"; loads "node
		// replicas-before>after leads-before>after", a draining node
		// marked "(draining)".
		steps, loads []string
		blocked      string
		truncated    bool
		inProgress   int
	}{
		{name: "no groups", servers: voters("a")},
		{
			name: "balanced", servers: voters("a", "b", "c"),
			tab:   fsm.DataGroupTable{Nodes: []string{"a", "b", "c"}, Groups: []fsm.DataGroup{group(1, "a", "b", "c"), group(2, "b", "c", "a"), group(3, "c", "a", "b")}},
			loads: []string{"a 3>3 1>1", "b 3>3 1>1", "c 3>3 1>1"},
		},
		{
			// a gives group 2 (which it does not lead) to d; then c, the
			// highest id of the two holding four, gives group 1, which a
			// then hands to d (a led two, d none); then they are within
			// two.
			name: "a node joined", tab: uneven, servers: voters("a", "b", "c", "d"),
			steps: []string{"1 replica 2 a>d", "2 replica 1 c>d", "2 leader 1 a>d"},
			loads: []string{"a 4>3 2>1", "b 4>4 1>1", "c 4>3 1>1", "d 0>2 0>1"},
		},
		{
			name: "bounded", tab: uneven, servers: voters("a", "b", "c", "d"), maxSteps: 1,
			steps:     []string{"1 replica 2 a>d"},
			loads:     []string{"a 4>3 2>2", "b 4>4 1>1", "c 4>4 1>1", "d 0>1 0>0"},
			truncated: true,
		},
		{
			name: "moves in progress", tab: moving, servers: voters("a", "b", "c", "d"), inProgress: 1,
			steps: []string{"1 replica 2 a>d", "2 replica 1 c>d", "2 leader 1 a>d"},
			loads: []string{"a 4>3 2>1", "b 4>4 1>1", "c 4>3 1>1", "d 0>2 0>1"},
		},
		{
			name: "the empty node is drained", tab: withDrain(uneven, "d"), servers: voters("a", "b", "c", "d"),
			loads: []string{"a 4>4 2>2", "b 4>4 1>1", "c 4>4 1>1", "d (draining) 0>0 0>0"},
		},
		{
			name: "a drained node holds replicas", tab: withDrain(uneven, "c"), servers: voters("a", "b", "c", "d"),
			blocked: "the meta leader changes the table first (node c drained)",
			loads:   []string{"a 4>4 2>2", "b 4>4 1>1", "c (draining) 4>4 1>1", "d 0>0 0>0"},
		},
		{
			name: "a member to place", tab: uneven, servers: voters("a", "b", "c", "d", "e"),
			blocked: "the meta leader changes the table first (node e joined)",
			loads:   []string{"a 4>4 2>2", "b 4>4 1>1", "c 4>4 1>1", "d 0>0 0>0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := fmt.Sprint(tt.tab.Groups)
			p, err := balancePlan(tt.tab, nil, tt.servers, 1, 3, cmp.Or(tt.maxSteps, maxBalanceSteps))
			if err != nil {
				t.Fatal(err)
			}
			var steps, loads []string
			for _, s := range p.Steps {
				steps = append(steps, fmt.Sprintf("%d %s %d %s>%s", s.Step, s.Kind, s.Group, s.From, s.To))
			}
			for _, l := range p.Loads {
				node := l.Node
				if l.Draining {
					node += " (draining)"
				}
				loads = append(loads, fmt.Sprintf("%s %d>%d %d>%d", node, l.ReplicasBefore, l.ReplicasAfter, l.LeadsBefore, l.LeadsAfter))
			}
			if !slices.Equal(steps, tt.steps) || !slices.Equal(loads, tt.loads) {
				t.Errorf("steps %q, loads %q; want %q, %q", steps, loads, tt.steps, tt.loads)
			}
			if p.Blocked != tt.blocked || p.Truncated != tt.truncated || p.InProgress != tt.inProgress || p.Groups != len(tt.tab.Groups) || p.ReplicationFactor != 3 {
				t.Errorf("plan %+v; want blocked %q, truncated %v, %d in progress", p, tt.blocked, tt.truncated, tt.inProgress)
			}
			if after := fmt.Sprint(tt.tab.Groups); after != before {
				t.Errorf("the plan changed the table: %s, was %s", after, before)
			}
		})
	}
}

// TestListMovesDuringDrain: four nodes with balancing off. The plan shows
// the move balancing would make to the node that joined last, the same on
// every node. Draining n2 marks the groups that held it, and every node
// (n2 too) lists those moves while they are marked, with the drain as
// reason, a start, and the group's voters as a replica reports them: n2
// still a voter at first. Once the groups finished, nothing is listed,
// and the plan shows n2 drained. Ending the drain leaves n2 empty
// (balancing is off), and the plan moves replicas to it.
func TestListMovesDuringDrain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	c, nodes, describe := dataGroupCluster(ctx, t, func(cfg *Config) {
		cfg.DataGroupsPerNode, cfg.ReplicationFactor, cfg.MaxMoves = 1, 3, -1
	})
	l := nodes[0]
	n4 := c.open(ctx, "n4", false)
	if err := l.Join(ctx, joinRequest(n4), c.probe); err != nil {
		t.Fatal(err)
	}
	nodes = append(nodes, n4)
	n2, n3 := nodes[1], nodes[2]
	waitGroupsSettled(ctx, t, l, nodes, 4, describe)
	noMarks := func() bool {
		return !slices.ContainsFunc(l.FSM().DataGroups().Groups, func(g fsm.DataGroup) bool { return g.Move != nil })
	}
	waitFor(ctx, t, "the joins' marks cleared", noMarks, describe)
	applied := func(n *Node) {
		t.Helper()
		if err := NewBackend(n).AwaitApplied(ctx, l.FSM().AppliedIndex(), time.Minute); err != nil {
			t.Fatal(err)
		}
	}

	// Balancing is off, so n4 keeps the one replica of its own group.
	applied(n3)
	plan := checkPlan(t, l, "n4")
	if other := checkPlan(t, n3, "n4"); fmt.Sprint(other.Steps, other.Loads) != fmt.Sprint(plan.Steps, plan.Loads) {
		t.Errorf("n3 plans %+v, the leader %+v", other, plan)
	}

	if _, err := l.DrainNode(ctx, "n2", false); err != nil {
		t.Fatal(err)
	}
	var listed, progress, fromLeader int
	waitFor(ctx, t, "n2 drained and the marks cleared", func() bool {
		for _, n := range []*Node{l, n2, n3} {
			moves, err := n.ListMoves(ctx)
			if err != nil {
				t.Fatalf("%s: list moves: %v", n.NodeID(), err)
			}
			for _, m := range moves {
				if !strings.Contains(m.Move.Reason, "node n2 drained") {
					continue
				}
				listed++
				checkMove(t, n.NodeID(), m, start)
				if m.VotersError == "" && slices.Equal(m.RemovedVoters(), []string{"n2"}) {
					progress++
				}
				if m.VotersFromLeader {
					fromLeader++
				}
			}
		}
		return !holds(l, "n2") && noMarks()
	}, describe)
	if listed == 0 || progress == 0 || fromLeader == 0 {
		t.Errorf("while n2 drained: %d moves listed, %d with n2 still a voter, %d with the voters of a group's leader; want some of each", listed, progress, fromLeader)
	}
	for _, n := range nodes {
		applied(n)
		if moves, err := n.ListMoves(ctx); err != nil || len(moves) != 0 {
			t.Errorf("%s lists %+v, %v after the drain, want nothing", n.NodeID(), moves, err)
		}
	}
	p, err := n2.PlanBalance()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(p.Nodes, "n2") || !slices.ContainsFunc(p.Loads, func(l backend.NodeLoad) bool {
		return l.Node == "n2" && l.Draining && l.ReplicasBefore == 0 && l.ReplicasAfter == 0
	}) {
		t.Errorf("plan on the drained n2: %+v", p)
	}

	if _, err := l.DrainNode(ctx, "n2", true); err != nil {
		t.Fatal(err)
	}
	applied(n2)
	checkPlan(t, n2, "n2")
}

// checkMove checks what n lists of a move of the drain of n2, begun after
// start.
func checkMove(t *testing.T, n string, m backend.MoveState, start time.Time) {
	t.Helper()
	if !slices.Equal(m.Move.Removed, []string{"n2"}) || len(m.Move.Added) != 1 || !slices.Contains(m.Replicas, m.Move.Added[0]) || slices.Contains(m.Replicas, "n2") {
		t.Errorf("%s lists group %d: %+v", n, m.Group, m)
	}
	if m.Move.Since.Before(start) || m.Move.Since.After(time.Now()) || m.Age < 0 || m.Age > time.Since(start) {
		t.Errorf("%s lists group %d begun at %v, %v ago; the test began at %v", n, m.Group, m.Move.Since, m.Age, start)
	}
	if m.VotersError != "" {
		return // no replica answered in time: allowed, said
	}
	if len(m.Voters) == 0 || m.VotersFrom == "" || !slices.IsSorted(m.Voters) {
		t.Errorf("%s lists group %d with voters %v from %q", n, m.Group, m.Voters, m.VotersFrom)
	}
	for _, v := range m.Voters {
		if !slices.Contains(m.Replicas, v) && !slices.Contains(m.Move.Removed, v) {
			t.Errorf("%s lists group %d with voter %s, neither a replica nor removed: %+v", n, m.Group, v, m)
		}
	}
}

// checkPlan checks n's balance plan: at least one replica move, each to
// node to (the one that holds the fewest), and counts that the steps make
// from the table, within two of each other after. It returns the plan.
func checkPlan(t *testing.T, n *Node, to string) backend.BalancePlan {
	t.Helper()
	p, err := n.PlanBalance()
	if err != nil {
		t.Fatal(err)
	}
	tab := n.FSM().DataGroups()
	counts := map[string]int{}
	for _, g := range tab.Groups {
		for _, r := range g.Replicas {
			counts[r]++
		}
	}
	moves := 0
	for _, s := range p.Steps {
		if s.Kind != backend.BalanceReplica {
			continue
		}
		moves++
		if s.To != to {
			t.Errorf("%s plans a move to %s, want every move to %s: %+v", n.NodeID(), s.To, to, p)
		}
		counts[s.From]--
		counts[s.To]++
	}
	if moves == 0 || p.Blocked != "" || p.Truncated || p.Groups != len(tab.Groups) {
		t.Fatalf("%s plans %+v from %+v; want replica moves to %s", n.NodeID(), p, tab, to)
	}
	lo, hi := len(tab.Groups), 0
	for _, ld := range p.Loads {
		if ld.ReplicasAfter != counts[ld.Node] {
			t.Errorf("%s: %s holds %d replicas after the plan, but its steps leave %d: %+v", n.NodeID(), ld.Node, ld.ReplicasAfter, counts[ld.Node], p)
		}
		if !ld.Draining {
			lo, hi = min(lo, ld.ReplicasAfter), max(hi, ld.ReplicasAfter)
		}
	}
	if hi-lo > balanceSlack {
		t.Errorf("%s: after the plan, the nodes hold %d to %d replicas: %+v", n.NodeID(), lo, hi, p)
	}
	return p
}
