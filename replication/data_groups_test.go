package replication

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

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
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool, describe func() string) {
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
			if !slices.Equal(voters[g.ID], all) || leaders[g.ID] != g.Replicas[0] {
				return false
			}
		}
		return true
	}
	waitFor(ctx, t, "six groups of three voters, each led by its preferred leader", settled, describe)
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
	set, changed, err := plan(fsm.DataGroupTable{}, servers, 2, 3)
	if err != nil || !changed {
		t.Fatalf("plan: %v, changed %v", err, changed)
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
	again, changed, err := plan(tab, servers, 2, 3)
	if err != nil || changed || again.Base != 7 {
		t.Errorf("plan of a placed table: changed %v, base %d, %v", changed, again.Base, err)
	}
	// c becomes a voter: it joins every group (below the factor of 3)
	// without changing their bootstrap replicas, and its own two groups
	// start on three nodes.
	servers[2].Suffrage = raft.Voter
	grown, changed, err := plan(tab, servers, 2, 3)
	if err != nil || !changed || len(grown.Groups) != 6 {
		t.Fatalf("plan after c: %+v, changed %v, %v", grown, changed, err)
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
