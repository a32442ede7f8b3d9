package replication

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
)

// TestDataGroupsRetireMovedReplicas: draining n2 of four nodes moves its
// replicas away; once the table has not listed n2 in a group for the
// retire delay and the group's leader has committed a configuration
// without n2, n2 closes its replica and deletes its directory, while
// reads through n2 still answer (from the other replicas). Ending the
// drain places replicas on n2 again: it opens those groups afresh (a new
// Raft layer on the same port) and catches up to every record.
func TestDataGroupsRetireMovedReplicas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, nodes, describe := fourNodeGroupsWith(ctx, t, func(cfg *Config) { cfg.retireAfter = time.Second })
	l, n2 := nodes[0], nodes[1]
	b := NewBackend(l)
	fillTopic(ctx, t, b, "kept", 8, 10)
	dirs := func() []string {
		ents, _ := os.ReadDir(filepath.Join(n2.cfg.DataDir, "groups"))
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	held := len(n2.DataGroupReplicas())
	if held == 0 || len(dirs()) != held {
		t.Fatalf("n2 runs %d replicas with directories %v", held, dirs())
	}
	if _, err := l.DrainNode(ctx, "n2", false); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "n2 drained", func() bool { return !holds(l, "n2") }, describe)
	waitGroupsSettled(ctx, t, l, nodes, 4, describe)
	var tombstones []string
	waitFor(ctx, t, "n2's replicas retired and their directories deleted, tombstones left", func() bool {
		tombstones = slices.DeleteFunc(dirs(), func(name string) bool { return filepath.Ext(name) != ".left" })
		return len(n2.DataGroupReplicas()) == 0 && len(dirs()) == held && len(tombstones) == held
	}, func() string {
		return fmt.Sprintf("n2 runs %d replicas, directories %v; %s", len(n2.DataGroupReplicas()), dirs(), describe())
	})
	if err := NewBackend(n2).AwaitApplied(ctx, l.FSM().AppliedIndex(), time.Minute); err != nil {
		t.Fatal(err)
	}
	for p := range int32(8) {
		waitFor(ctx, t, fmt.Sprintf("kept-%d read through n2, which holds no replica", p), func() bool {
			r, err := NewBackend(n2).Read("kept", p, 0, 1<<20)
			return err == nil && r.EndOffset == 10
		}, describe)
	}
	// The other nodes kept theirs: nothing of theirs was retired.
	for _, n := range []*Node{nodes[0], nodes[2], nodes[3]} {
		if got := len(n.DataGroupReplicas()); got != 4 {
			t.Errorf("%s runs %d replicas, want 4 (four groups of three over three nodes)", n.NodeID(), got)
		}
	}

	if _, err := l.DrainNode(ctx, "n2", true); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "n2 takes replicas again", func() bool { return holds(l, "n2") }, describe)
	waitGroupsSettled(ctx, t, l, nodes, 4, describe)
	tab := l.FSM().DataGroups()
	mt, _ := l.FSM().Topic("kept")
	caught := 0
	for p, g := range mt.Placement {
		for _, dg := range tab.Groups {
			if dg.ID == g && slices.Contains(dg.Replicas, "n2") {
				waitOwnReplica(ctx, t, n2, "kept", int32(p), 10, describe)
				caught++
			}
		}
	}
	if caught == 0 {
		t.Fatalf("n2 holds none of kept's groups again: %s", describe())
	}
	// A group n2 held before is never bootstrapped by n2 again, even one
	// it was a bootstrap replica of: it catches up from the group.
	for _, r := range n2.DataGroupReplicas() {
		if dg := n2.dataGroup(r.ID); dg != nil && dg.bootstrapped && slices.Contains(tombstones, fmt.Sprintf("g%d.left", r.ID)) {
			t.Errorf("n2 bootstrapped group %d again after it retired its replica", r.ID)
		}
	}
}

// TestMayBootstrap: a node starts a data group from its bootstrap
// configuration only as one of its bootstrap replicas and only if it
// never held the group before.
func TestMayBootstrap(t *testing.T) {
	dir := t.TempDir()
	d := &dataGroups{n: &Node{cfg: Config{NodeID: "n1", DataDir: dir}}}
	made := fsm.DataGroup{ID: 3, Replicas: []string{"n2", "n1", "n3"}, Bootstrap: []string{"n1", "n2", "n3"}}
	if !d.mayBootstrap(made) {
		t.Error("a bootstrap replica of a group it never held does not bootstrap it")
	}
	if d.mayBootstrap(fsm.DataGroup{ID: 3, Replicas: []string{"n1", "n2", "n3"}, Bootstrap: []string{"n2", "n3", "n4"}}) {
		t.Error("a node that is not a bootstrap replica bootstraps the group")
	}
	if err := os.MkdirAll(filepath.Join(dir, "groups"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeTombstone(dir, 3); err != nil {
		t.Fatal(err)
	}
	if d.mayBootstrap(made) {
		t.Error("a node that retired its replica of the group bootstraps it again")
	}
	other := made
	other.ID = 4
	if !d.mayBootstrap(other) {
		t.Error("group 3's tombstone stops group 4's bootstrap")
	}
}

// TestStaleReplicaTakesItsNewLeader: a node away while its group
// replaced it, handed its leadership to the replica that took its place
// and listed it again comes back with the group's configuration of
// before, which does not hold the group's leader. Its replica takes the
// leader's connections (the table lists the leader) and votes in the
// group again; checking only its own configuration, it refused the
// leader for good (a nemesis run of five nodes stopped on it).
func TestStaleReplicaTakesItsNewLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// No balancing and no healing: the test moves the replicas itself.
	c, nodes, describe := fourNodeGroupsWith(ctx, t, func(cfg *Config) { cfg.MaxMoves, cfg.DeadNodeTimeout = -1, 0 })
	l, n2 := nodes[0], nodes[1]
	var g fsm.DataGroup
	for _, dg := range l.FSM().DataGroups().Groups {
		if slices.Contains(dg.Replicas, "n2") && !slices.Contains(dg.Replicas, "n1") {
			g = dg
		}
	}
	if g.ID == 0 {
		for _, dg := range l.FSM().DataGroups().Groups {
			if slices.Contains(dg.Replicas, "n2") {
				g = dg
			}
		}
	}
	if g.ID == 0 {
		t.Fatalf("no group holds n2: %s", describe())
	}
	var a, b, newcomer string // the replicas that stay; the one that takes n2's place
	for _, id := range []string{"n1", "n2", "n3", "n4"} {
		switch {
		case !slices.Contains(g.Replicas, id):
			newcomer = id
		case id == "n2":
		case a == "":
			a = id
		default:
			b = id
		}
	}
	setGroup := func(replicas []string, move fsm.ReplicaMove) {
		t.Helper()
		for try := 0; ; try++ {
			tab := l.FSM().DataGroups()
			groups := slices.Clone(tab.Groups)
			for i := range groups {
				if groups[i].ID == g.ID {
					groups[i].Replicas, groups[i].Move = replicas, &move
				}
			}
			data, err := fsm.EncodeDataGroups(time.Now().UnixNano(), fsm.DataGroupsSet{Base: tab.Epoch, Groups: groups, Nodes: tab.Nodes, Draining: tab.Draining})
			if err != nil {
				t.Fatal(err)
			}
			if _, err = l.propose(ctx, data); err == nil {
				return
			} else if !errors.Is(err, backend.ErrMembershipChange) || try == 10 {
				t.Fatalf("set group %d's replicas to %v: %v", g.ID, replicas, err)
			}
		}
	}
	settledAs := func(want []string, leader string) func() bool {
		return func() bool {
			voters, leaders := dataGroupsView(nodes)
			moving := false
			for _, dg := range l.FSM().DataGroups().Groups {
				moving = moving || dg.ID == g.ID && dg.Move != nil
			}
			return !moving && leaders[g.ID] == leader && slices.Equal(voters[g.ID], slices.Sorted(slices.Values(want)))
		}
	}

	// n2 goes away; the group replaces it with the newcomer, which leads.
	cfg := c.stop(n2)
	nodes = slices.Delete(slices.Clone(nodes), 1, 2)
	setGroup([]string{newcomer, a, b}, fsm.ReplicaMove{Added: []string{newcomer}, Removed: []string{"n2"}, Reason: "test: n2 away", Since: time.Now().UnixNano()})
	waitFor(ctx, t, fmt.Sprintf("group %d of %s, %s, %s, led by %s", g.ID, newcomer, a, b, newcomer), settledAs([]string{newcomer, a, b}, newcomer), describe)

	// The table lists n2 again in a's place; n2 comes back with the
	// configuration n2, a, b.
	setGroup([]string{newcomer, b, "n2"}, fsm.ReplicaMove{Added: []string{"n2"}, Removed: []string{a}, Reason: "test: n2 back", Since: time.Now().UnixNano()})
	n2 = c.start(cfg)
	nodes = append(nodes, n2)
	waitFor(ctx, t, fmt.Sprintf("group %d of %s, %s, n2, led by %s", g.ID, newcomer, b, newcomer), settledAs([]string{newcomer, b, "n2"}, newcomer), func() string {
		var conf []string
		if dg := n2.dataGroup(g.ID); dg != nil {
			for _, s := range dg.raft.GetConfiguration().Configuration().Servers {
				conf = append(conf, string(s.ID))
			}
		}
		return fmt.Sprintf("n2's replica's configuration %v; %s", conf, describe())
	})
}
