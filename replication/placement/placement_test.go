package placement

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// nodesN returns node ids n1..nN.
func nodesN(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("n%d", i+1)
	}
	return out
}

// spread returns the lowest and highest count among nodes.
func spread(counts map[string]int, nodes []string) (lo, hi int) {
	lo, hi = counts[nodes[0]], counts[nodes[0]]
	for _, n := range nodes {
		lo, hi = min(lo, counts[n]), max(hi, counts[n])
	}
	return lo, hi
}

// TestGrowBalances: groups placed over a fixed set of nodes have
// min(rf, N) distinct replicas each, and every node holds preferred
// leaderships within one, and replicas within two, of every other node,
// for every node count, group count and factor tried.
func TestGrowBalances(t *testing.T) {
	for n := 1; n <= 9; n++ {
		for _, g := range []int{1, 2, 3, 7, 12, 24, 48, 96} {
			for rf := 1; rf <= 5; rf++ {
				nodes := nodesN(n)
				p, err := Grow(nil, nodes, g, rf)
				if err != nil {
					t.Fatalf("n=%d g=%d rf=%d: %v", n, g, rf, err)
				}
				if err := Check(p, nodes, rf); err != nil {
					t.Fatalf("n=%d g=%d rf=%d: %v", n, g, rf, err)
				}
				for _, grp := range p {
					if len(grp.Replicas) != min(rf, n) {
						t.Fatalf("n=%d g=%d rf=%d: group %d has %d replicas", n, g, rf, grp.ID, len(grp.Replicas))
					}
				}
				l := loadOf(p, nodes)
				if lo, hi := spread(l.replicas, nodes); hi-lo > 2 {
					t.Errorf("n=%d g=%d rf=%d: replicas per node from %d to %d", n, g, rf, lo, hi)
				}
				if lo, hi := spread(l.preferred, nodes); hi-lo > 1 {
					t.Errorf("n=%d g=%d rf=%d: preferred leaderships per node from %d to %d", n, g, rf, lo, hi)
				}
			}
		}
	}
}

// TestJoinsFromOneNode: a cluster that starts as one node with G groups
// and grows by joins, one at a time, up to its replication factor: every
// group gains each joining node until it has rf replicas (none stays at
// one replica once three nodes are up), and each node leads ⌈G/N⌉ ± 1
// groups after every join.
func TestJoinsFromOneNode(t *testing.T) {
	for _, g := range []int{1, 4, 12, 48, 96} {
		for _, rf := range []int{1, 3, 5} {
			nodes := nodesN(1)
			p, err := Grow(nil, nodes, g, rf)
			if err != nil {
				t.Fatal(err)
			}
			for n := 2; n <= rf; n++ {
				nodes = nodesN(n)
				if p, err = Join(p, nodes, nodes[n-1], rf); err != nil {
					t.Fatalf("g=%d rf=%d join n%d: %v", g, rf, n, err)
				}
				if err := Check(p, nodes, rf); err != nil {
					t.Fatalf("g=%d rf=%d after n%d: %v", g, rf, n, err)
				}
				for _, grp := range p {
					if len(grp.Replicas) != n {
						t.Fatalf("g=%d rf=%d after n%d: group %d has %d replicas", g, rf, n, grp.ID, len(grp.Replicas))
					}
				}
				share := (g + n - 1) / n
				l := loadOf(p, nodes)
				for _, nd := range nodes {
					if c := l.preferred[nd]; c < share-1 || c > share+1 {
						t.Errorf("g=%d rf=%d after n%d: %s leads %d groups, want %d ± 1", g, rf, n, nd, c, share)
					}
				}
			}
		}
	}
}

// TestJoinAtFactor: a node that joins groups already at the replication
// factor gains no replica and leads nothing (moving replicas is not
// placement's business yet), and the plan is otherwise unchanged; Grow
// then puts new groups on it first.
func TestJoinAtFactor(t *testing.T) {
	p, err := Grow(nil, nodesN(3), 12, 3)
	if err != nil {
		t.Fatal(err)
	}
	joined, err := Join(p, nodesN(4), "n4", 3)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(joined) != fmt.Sprint(p) {
		t.Errorf("a join at the factor changed the plan:\n%v\n%v", p, joined)
	}
	grown, err := Grow(joined, nodesN(4), 4, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, grp := range grown[12:] {
		if grp.Preferred() != "n4" {
			t.Errorf("new group %d prefers %s, want the empty node n4", grp.ID, grp.Preferred())
		}
	}
}

// TestPlacementIsPure: the same arguments give the same plan, and the
// argument is left alone.
func TestPlacementIsPure(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		n, g, rf := 1+r.IntN(7), r.IntN(40), 1+r.IntN(4)
		nodes := nodesN(n)
		a, err := Grow(nil, nodes, g, rf)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Grow(nil, nodes, g, rf)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("Grow gave two plans for the same arguments")
		}
		before := fmt.Sprint(a)
		more := append(slices.Clone(nodes), "new")
		if _, err := Join(a, more, "new", rf); err != nil {
			t.Fatal(err)
		}
		if _, err := Grow(a, more, 3, rf); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(a) != before {
			t.Fatalf("Join or Grow changed its argument")
		}
	}
}

// TestPartitionsRoundRobin: a topic's partitions go to consecutive groups
// from the one its creation index picks, each group at most ⌈P/G⌉ times.
func TestPartitionsRoundRobin(t *testing.T) {
	p, err := Grow(nil, nodesN(3), 12, 3)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Partitions(p, 17, 30)
	if err != nil {
		t.Fatal(err)
	}
	count := map[uint64]int{}
	for i, g := range got {
		count[g]++
		if want := p[(17+i)%12].ID; g != want {
			t.Fatalf("partition %d in group %d, want %d", i, g, want)
		}
	}
	for g, c := range count {
		if c > 3 {
			t.Errorf("group %d holds %d of 30 partitions over 12 groups", g, c)
		}
	}
	if other, _ := Partitions(p, 18, 1); other[0] == got[0] {
		t.Errorf("topics created at indexes 17 and 18 start in the same group")
	}
}

// TestPlacementRefuses: bad arguments are ErrInvalid and change nothing.
func TestPlacementRefuses(t *testing.T) {
	p, _ := Grow(nil, nodesN(3), 4, 3)
	for name, f := range map[string]func() error{
		"no nodes":                func() error { _, err := Grow(nil, nil, 1, 3); return err },
		"factor 0":                func() error { _, err := Grow(nil, nodesN(3), 1, 0); return err },
		"a node twice":            func() error { _, err := Grow(nil, []string{"a", "a"}, 1, 1); return err },
		"negative groups":         func() error { _, err := Grow(nil, nodesN(3), -1, 3); return err },
		"a replica not a node":    func() error { _, err := Grow(p, nodesN(2), 1, 3); return err },
		"joiner not among them":   func() error { _, err := Join(p, nodesN(3), "n9", 3); return err },
		"leaver still among them": func() error { _, err := Remove(p, nodesN(3), "n3", 3); return err },
		"the last node leaves":    func() error { _, err := Remove(Plan{{ID: 1, Replicas: []string{"n1"}}}, nil, "n1", 3); return err },
		"no groups":               func() error { _, err := Partitions(nil, 1, 1); return err },
		"negative partitions":     func() error { _, err := Partitions(p, 1, -1); return err },
		"a group twice": func() error {
			return Check(Plan{{ID: 1, Replicas: []string{"n1"}}, {ID: 1, Replicas: []string{"n2"}}}, nodesN(3), 3)
		},
		"a replica twice": func() error { return Check(Plan{{ID: 1, Replicas: []string{"n1", "n1"}}}, nodesN(3), 3) },
	} {
		if err := f(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// TestRemoveHeals: when a node leaves, every group that held it gets
// another node in its place while one is left outside the group (so no
// group stays below min(rf, N)), no other group changes, a group it led
// gets one of its replicas as preferred leader, and the replicas and
// preferred leaderships stay spread (within six and two of each other: the balance of replicas under change is a later move)
// over the nodes that remain; removing nodes one by one down to one node
// keeps every plan valid.
func TestRemoveHeals(t *testing.T) {
	for _, g := range []int{1, 6, 12, 48} {
		for _, rf := range []int{1, 3} {
			nodes := nodesN(6)
			p, err := Grow(nil, nodes, g, rf)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(uint64(g), uint64(rf)))
			for len(nodes) > 1 {
				gone := nodes[rng.IntN(len(nodes))]
				left := slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return n == gone })
				q, err := Remove(p, left, gone, rf)
				if err != nil {
					t.Fatalf("g=%d rf=%d: remove %s: %v", g, rf, gone, err)
				}
				if err := Check(q, left, rf); err != nil {
					t.Fatalf("g=%d rf=%d: after removing %s: %v", g, rf, gone, err)
				}
				for i, grp := range q {
					held := slices.Contains(p[i].Replicas, gone)
					switch {
					case grp.ID != p[i].ID:
						t.Fatalf("group ids changed: %d, was %d", grp.ID, p[i].ID)
					case !held && !slices.Equal(grp.Replicas, p[i].Replicas):
						t.Errorf("g=%d rf=%d: group %d did not hold %s and changed from %v to %v", g, rf, grp.ID, gone, p[i].Replicas, grp.Replicas)
					case len(grp.Replicas) != min(rf, len(left)):
						t.Errorf("g=%d rf=%d: group %d has %d replicas over %d nodes", g, rf, grp.ID, len(grp.Replicas), len(left))
					case held && p[i].Preferred() != gone && grp.Preferred() != p[i].Preferred():
						t.Errorf("g=%d rf=%d: group %d's preferred leader moved from %s though %s left", g, rf, grp.ID, p[i].Preferred(), gone)
					}
				}
				l := loadOf(q, left)
				if lo, hi := spread(l.replicas, left); hi-lo > 6 {
					t.Errorf("g=%d rf=%d: after removing %s, replicas per node from %d to %d", g, rf, gone, lo, hi)
				}
				if lo, hi := spread(l.preferred, left); hi-lo > 2 {
					t.Errorf("g=%d rf=%d: after removing %s, preferred leaderships per node from %d to %d", g, rf, gone, lo, hi)
				}
				p, nodes = q, left
			}
		}
	}
}

// TestBalanceGivesNewNodesTheirShare: a cluster whose groups are at their
// factor grows by joins; after each, Balance, applied until it moves
// nothing, moves one replica per step (one group, one node replaced by
// another it did not hold), ends with replica counts within the slack
// and preferred leaderships within two, and never changes a plan that is
// already even (a second pass changes nothing).
func TestBalanceGivesNewNodesTheirShare(t *testing.T) {
	for _, perNode := range []int{1, 2, 4} {
		for _, rf := range []int{2, 3} {
			nodes := nodesN(3)
			p, err := Grow(nil, nodes, 3*perNode, rf)
			if err != nil {
				t.Fatal(err)
			}
			for n := 4; n <= 7; n++ {
				id := fmt.Sprintf("n%d", n)
				nodes = append(nodes, id)
				if p, err = Join(p, nodes, id, rf); err != nil {
					t.Fatal(err)
				}
				if p, err = Grow(p, nodes, perNode, rf); err != nil {
					t.Fatal(err)
				}
				moves := 0
				for ; moves < 1000; moves++ {
					q, mv, changed, err := Balance(p, nodes, rf, 2)
					if err != nil {
						t.Fatal(err)
					}
					if !changed {
						break
					}
					if err := Check(q, nodes, rf); err != nil {
						t.Fatalf("perNode=%d rf=%d n=%d: %v", perNode, rf, n, err)
					}
					diff := 0
					for i := range q {
						before, after := slices.Clone(p[i].Replicas), slices.Clone(q[i].Replicas)
						slices.Sort(before)
						slices.Sort(after)
						if !slices.Equal(before, after) {
							diff++
							if q[i].ID != mv.Group || !slices.Contains(p[i].Replicas, mv.From) || slices.Contains(p[i].Replicas, mv.To) ||
								slices.Contains(q[i].Replicas, mv.From) || !slices.Contains(q[i].Replicas, mv.To) {
								t.Fatalf("group %d went from %v to %v; the move says %+v", q[i].ID, p[i].Replicas, q[i].Replicas, mv)
							}
						}
					}
					if diff > 1 {
						t.Fatalf("one step moved replicas of %d groups", diff)
					}
					p = q
				}
				if moves == 1000 {
					t.Fatalf("perNode=%d rf=%d n=%d: Balance never settles", perNode, rf, n)
				}
				l := loadOf(p, nodes)
				if lo, hi := spread(l.replicas, nodes); hi-lo > 2 {
					t.Errorf("perNode=%d rf=%d n=%d: replicas per node from %d to %d after %d moves", perNode, rf, n, lo, hi, moves)
				}
				if lo, hi := spread(l.preferred, nodes); hi-lo > 2 {
					t.Errorf("perNode=%d rf=%d n=%d: preferred leaderships per node from %d to %d", perNode, rf, n, lo, hi)
				}
				if l.replicas[id] == 0 {
					t.Errorf("perNode=%d rf=%d n=%d: the new node holds nothing", perNode, rf, n)
				}
			}
		}
	}
	// An even plan stays as it is.
	p, _ := Grow(nil, nodesN(4), 8, 3)
	if _, _, changed, err := Balance(p, nodesN(4), 3, 2); err != nil || changed {
		t.Errorf("Balance of an even plan: changed %v, %v", changed, err)
	}
}

// TestEvacuate: the replicas of the nodes evacuated go to the others
// (each group keeps min(rf, live) replicas off them when it can, and no
// replica twice), groups without them do not change, a group they led
// gets a preferred leader off them, and with no node left to take a
// replica it stays where it is.
func TestEvacuate(t *testing.T) {
	nodes := nodesN(6)
	p, err := Grow(nil, nodes, 12, 3)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"n2", "n5"}
	q, changed, err := Evacuate(p, nodes, out, 3)
	if err != nil || !changed {
		t.Fatalf("evacuate: changed %v, %v", changed, err)
	}
	if err := Check(q, nodes, 3); err != nil {
		t.Fatal(err)
	}
	for i, g := range q {
		held := slices.ContainsFunc(p[i].Replicas, func(r string) bool { return slices.Contains(out, r) })
		switch {
		case !held && !slices.Equal(g.Replicas, p[i].Replicas):
			t.Errorf("group %d held neither and changed: %v to %v", g.ID, p[i].Replicas, g.Replicas)
		case slices.ContainsFunc(g.Replicas, func(r string) bool { return slices.Contains(out, r) }):
			t.Errorf("group %d still on an evacuated node: %v", g.ID, g.Replicas)
		case len(g.Replicas) != 3:
			t.Errorf("group %d has %d replicas", g.ID, len(g.Replicas))
		}
	}
	if _, again, _ := Evacuate(q, nodes, out, 3); again {
		t.Error("evacuating again changed the plan")
	}
	// Three nodes, one out: no node takes its replicas; they stay.
	small, _ := Grow(nil, nodesN(3), 2, 3)
	r, changed, err := Evacuate(small, nodesN(3), []string{"n1"}, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range r {
		if len(g.Replicas) != 3 || g.Preferred() == "n1" {
			t.Errorf("group %d: %v (was %v)", g.ID, g.Replicas, small[i].Replicas)
		}
	}
	_ = changed
	if _, _, err := Evacuate(small, nodesN(3), []string{"n9"}, 3); !errors.Is(err, ErrInvalid) {
		t.Errorf("evacuating a node that is none: %v", err)
	}
}

// TestBalanceSkipsMovingGroups: a group whose replicas are changing gives
// no replica to balancing; the next group that can, does; with none left,
// nothing moves.
func TestBalanceSkipsMovingGroups(t *testing.T) {
	nodes := []string{"a", "b", "c"}
	p := Plan{
		{ID: 1, Replicas: []string{"b", "a"}, Moving: true},
		{ID: 2, Replicas: []string{"b", "a"}},
		{ID: 3, Replicas: []string{"a", "b"}},
		{ID: 4, Replicas: []string{"a", "b"}},
	}
	_, mv, _, err := Balance(p, nodes, 2, 2)
	if err != nil || mv.Group == 0 || mv.Group == 1 || mv.To != "c" {
		t.Fatalf("balance with group 1 moving: %+v, %v; want a move of another group to c", mv, err)
	}
	for i := range p {
		p[i].Moving = true
	}
	if _, mv, _, err := Balance(p, nodes, 2, 2); err != nil || mv.Group != 0 {
		t.Fatalf("balance with every group moving: %+v, %v; want no replica moved", mv, err)
	}
}

// TestBalanceBytes: groups of uneven sizes placed on 3 nodes, then 3
// nodes joining one at a time: balancing ends (each move lowers the sum of
// the squares of the nodes' bytes), keeps the replica counts within the
// slack, and leaves every node's bytes within 15 % of the mean; a plan it
// balanced does not move again when the groups grow by a few percent
// (hysteresis).
func TestBalanceBytes(t *testing.T) {
	const rf, groups = 3, 24
	rng := rand.New(rand.NewPCG(7, 11))
	nodes := nodesN(3)
	p, err := Grow(nil, nodes, groups, rf)
	if err != nil {
		t.Fatal(err)
	}
	for i := range p {
		p[i].Bytes = (1 + rng.Int64N(16)) << 30 // 1 to 16 GiB
	}
	balance := func(p Plan, nodes []string) (Plan, int) {
		t.Helper()
		moves := 0
		for step := 0; ; step++ {
			if step == 1000 {
				t.Fatalf("%d nodes: balancing did not end after %d steps", len(nodes), step)
			}
			q, mv, changed, err := Balance(p, nodes, rf, 2)
			if err != nil {
				t.Fatal(err)
			}
			if !changed {
				return p, moves
			}
			if mv.Group != 0 {
				moves++
			}
			p = q
		}
	}
	for n := 4; n <= 6; n++ {
		id := fmt.Sprintf("n%d", n)
		nodes = append(nodes, id)
		if p, err = Join(p, nodes, id, rf); err != nil {
			t.Fatal(err)
		}
		var moves int
		p, moves = balance(p, nodes)
		l := loadOf(p, nodes)
		var total int64
		lo, hi := groups, 0
		for _, nd := range nodes {
			total += l.bytes[nd]
			lo, hi = min(lo, l.replicas[nd]), max(hi, l.replicas[nd])
		}
		mean := total / int64(len(nodes))
		for _, nd := range nodes {
			if dev := float64(l.bytes[nd]-mean) / float64(mean); dev > 0.15 || dev < -0.15 {
				t.Errorf("%d nodes: %s holds %d GiB, %.0f %% off the mean %d GiB", len(nodes), nd, l.bytes[nd]>>30, 100*dev, mean>>30)
			}
		}
		if hi-lo > 2 {
			t.Errorf("%d nodes: replica counts %d to %d, more than the slack apart", len(nodes), lo, hi)
		}
		t.Logf("%d nodes: %d replica moves; replicas %d to %d; bytes per node %v GiB", len(nodes), moves, lo, hi, gib(l.bytes))
	}
	grown := p.clone()
	for i := range grown {
		grown[i].Bytes += grown[i].Bytes * int64(i%5) / 100
	}
	if _, mv, _, err := Balance(grown, nodes, rf, 2); err != nil || mv.Group != 0 {
		t.Errorf("groups a few percent larger: Balance moved %+v (%v)", mv, err)
	}
}

func gib(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		out[k] = v >> 30
	}
	return out
}

// TestBalanceBytesPastAStuckGiver: when the node with the most bytes has
// no replica to give (it holds one large group, which would overshoot,
// and groups too small to narrow the gap by half the slack, and it is at
// the fewest replicas, so it can only swap), the next fullest node gives
// instead: balancing does not stop while nodes are more than the slack
// apart and a move would narrow it.
func TestBalanceBytesPastAStuckGiver(t *testing.T) {
	const gib = 1 << 30
	nodes := []string{"a", "b", "c"}
	p := Plan{
		{ID: 1, Replicas: []string{"a"}, Bytes: 40 * gib},
		{ID: 2, Replicas: []string{"a"}, Bytes: gib / 10},
		{ID: 3, Replicas: []string{"a"}, Bytes: gib / 10},
		{ID: 4, Replicas: []string{"b"}, Bytes: 20 * gib},
		{ID: 5, Replicas: []string{"b"}, Bytes: 10 * gib},
		{ID: 6, Replicas: []string{"b"}, Bytes: 8 * gib},
		{ID: 7, Replicas: []string{"b"}, Bytes: gib / 10},
	}
	for id := uint64(8); id <= 12; id++ {
		p = append(p, Group{ID: id, Replicas: []string{"c"}, Bytes: gib})
	}
	q, mv, _, err := Balance(p, nodes, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if mv.From != "b" || mv.To != "c" {
		t.Fatalf("a holds 40.2 GiB, b 38.1, c 5 (a has no move): Balance moved %+v, want one from b to c", mv)
	}
	before, after := Bytes(p, nodes), Bytes(q, nodes)
	if after["c"] <= before["c"] || after["b"] >= before["b"] {
		t.Errorf("the move %+v took bytes from b %d -> %d to c %d -> %d", mv, before["b"], after["b"], before["c"], after["c"])
	}
}
