package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSimulatedCluster drives the placement code the meta leader runs
// (Join and Grow when a node joins, Remove when one leaves for good,
// Balance until it settles after each) through a seeded run: a cluster
// grows from three nodes to a hundred, ten groups per node (a thousand
// groups), with nodes leaving for good along the way. After every step:
// every plan is valid (distinct replicas on known nodes); every group is
// back to min(rf, N) replicas; a removal changed only the groups that
// held the node, each by one replica; a Balance step moved at most one
// replica. Each join's moves stay within 1.25 times (plus one) the lower
// bound of moves that gets the new node within the slack of the mean;
// the run ends balanced (replicas within the slack, preferred
// leaderships within two).
func TestSimulatedCluster(t *testing.T) {
	const (
		rf, perNode, slack = 3, 10, 2
		target             = 100
	)
	rng := rand.New(rand.NewPCG(42, 7))
	next := 4
	nodes := nodesN(3)
	p, err := Grow(nil, nodes, 3*perNode, rf)
	if err != nil {
		t.Fatal(err)
	}
	settle := func(what string) int {
		moves := 0
		for step := 0; ; step++ {
			if step > 100_000 {
				t.Fatalf("%s: Balance does not settle", what)
			}
			q, mv, changed, err := Balance(p, nodes, rf, slack)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if !changed {
				return moves
			}
			if err := Check(q, nodes, rf); err != nil {
				t.Fatalf("%s: balance step %d: %v", what, step, err)
			}
			if mv.Group != 0 {
				moves++
			}
			changedGroups := 0
			for i := range q {
				a, b := slices.Sorted(slices.Values(p[i].Replicas)), slices.Sorted(slices.Values(q[i].Replicas))
				if !slices.Equal(a, b) {
					changedGroups++
				}
			}
			want := 0
			switch {
			case mv.Back != 0:
				want = 2 // a swap
			case mv.Group != 0:
				want = 1
			}
			if changedGroups != want {
				t.Fatalf("%s: one balance step changed the replicas of %d groups (move %+v)", what, changedGroups, mv)
			}
			p = q
		}
	}
	joins, removals, totalMoves, totalBound := 0, 0, 0, 0
	for len(nodes) < target {
		if len(nodes) > 4 && rng.IntN(6) == 0 {
			// A node leaves for good; its groups heal.
			gone := nodes[rng.IntN(len(nodes))]
			left := slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return n == gone })
			q, err := Remove(p, left, gone, rf)
			if err != nil {
				t.Fatal(err)
			}
			for i := range q {
				before, after := p[i].Replicas, q[i].Replicas
				if !slices.Contains(before, gone) {
					if !slices.Equal(before, after) {
						t.Fatalf("removing %s changed group %d, which did not hold it", gone, q[i].ID)
					}
					continue
				}
				kept := 0
				for _, r := range before {
					if r != gone && slices.Contains(after, r) {
						kept++
					}
				}
				if kept != len(before)-1 || len(after) != min(rf, len(left)) {
					t.Fatalf("removing %s: group %d went from %v to %v", gone, q[i].ID, before, after)
				}
			}
			p, nodes = q, left
			removals++
			totalMoves += settle("after removing " + gone)
			continue
		}
		id := fmt.Sprintf("n%d", next)
		next++
		nodes = append(nodes, id)
		if p, err = Join(p, nodes, id, rf); err != nil {
			t.Fatal(err)
		}
		if p, err = Grow(p, nodes, perNode, rf); err != nil {
			t.Fatal(err)
		}
		l := loadOf(p, nodes)
		total := 0
		for _, n := range nodes {
			total += l.replicas[n]
		}
		// The fewest moves that bring the new node within the slack of
		// the mean (every move gives it at most one replica).
		bound := max(0, total/len(nodes)-slack-l.replicas[id])
		moves := settle("after " + id + " joined")
		if moves > bound+bound/4+1 {
			t.Errorf("%s joined: %d moves, the lower bound is %d", id, moves, bound)
		}
		joins++
		totalMoves += moves
		totalBound += bound
	}
	l := loadOf(p, nodes)
	if lo, hi := spread(l.replicas, nodes); hi-lo > slack {
		t.Errorf("the end: replicas per node from %d to %d", lo, hi)
	}
	if lo, hi := spread(l.preferred, nodes); hi-lo > 2 {
		t.Errorf("the end: preferred leaderships per node from %d to %d", lo, hi)
	}
	for _, g := range p {
		if len(g.Replicas) != rf {
			t.Errorf("group %d has %d replicas", g.ID, len(g.Replicas))
		}
	}
	t.Logf("%d nodes, %d groups: %d joins, %d removals; %d replica moves (joins' lower bound %d)", len(nodes), len(p), joins, removals, totalMoves, totalBound)
}
