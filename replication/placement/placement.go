// Package placement decides where data groups live, as pure functions of
// what it is given: which nodes hold each group's replicas, which of them
// is the group's preferred leader, and which group a new topic's
// partitions go to. It keeps no state and reads no clock; the meta group
// that will hold the placement applies its answers. It replaces a node
// that left and moves replicas, one at a time, toward an even load.
//
// The rules:
//
//   - A group's replicas are distinct nodes, min(rf, nodes) of them.
//   - A new group (Grow) is led by the node that leads the fewest
//     groups, and its other replicas are the nodes that hold the fewest
//     (ties: the other count, then the lowest id); so, when groups are
//     placed over a fixed set of nodes, the nodes' preferred-leader
//     counts stay within one of each other and their replica counts
//     within two (the leader of a group is chosen before its replica
//     count is looked at).
//   - A joining node (Join) becomes a replica of every group below the
//     replication factor, and then the preferred leader of groups it holds
//     until it leads its share (⌈G/N⌉ at most), taking them from the nodes
//     that lead the most.
//   - A node that leaves (Remove) is replaced in each group that held it
//     by the node outside the group that holds the fewest replicas, so a
//     group returns to its replication factor while enough nodes remain.
//   - Evacuate gives the replicas of members that are to hold none (dead
//     past a timeout) to the others, as Remove does, keeping the members.
//   - Balance moves one replica at a time from the node that holds the
//     most to the one that holds the fewest while they are more than a
//     slack apart; once they are within it, from the node with the most
//     bytes (the next fullest when it has nothing to give) to one with
//     fewer while their bytes are more than a tenth of the mean apart
//     (BytesSlack); and it hands preferred leaderships over
//     within groups while the leaders' counts are more than one apart.
//   - A topic's partitions go round robin over the groups from an offset
//     its creation index gives (Partitions), so one hot topic spreads
//     over every group's leader and topics do not all start at group 0.
//     The assignment is made once, at creation, with the groups of that
//     time: partitions never move when groups are added.
//
// Invariants: every function returns a new plan and leaves its argument
// alone, and the same arguments give the same answer (ties are broken by
// node id and group id).
package placement

import (
	"errors"
	"fmt"
	"slices"
	"sort"
)

// Group is one data group's placement.
type Group struct {
	// ID is the group's id, unique in a plan.
	ID uint64
	// Replicas are the node ids that hold the group, the preferred leader
	// first.
	Replicas []string
	// Moving marks a group whose replicas are changing: Balance moves no
	// replica of it (it may still hand its preferred leadership over).
	Moving bool
	// Bytes is the size of the group's data (each replica holds all of
	// it); 0 when not known. Balance evens the nodes' bytes with it.
	Bytes int64
}

// Preferred is the group's preferred leader, "" for a group without
// replicas.
func (g Group) Preferred() string {
	if len(g.Replicas) == 0 {
		return ""
	}
	return g.Replicas[0]
}

// Plan is the placement of every data group, by ascending id.
type Plan []Group

// ErrInvalid is a plan, node list or factor that breaks the rules.
var ErrInvalid = errors.New("placement: invalid")

// clone returns a deep copy of p.
func (p Plan) clone() Plan {
	out := make(Plan, len(p))
	for i, g := range p {
		out[i] = Group{ID: g.ID, Replicas: slices.Clone(g.Replicas), Moving: g.Moving, Bytes: g.Bytes}
	}
	return out
}

// load counts, per node of nodes, the replicas, preferred leaderships and
// bytes p gives it.
type load struct {
	replicas, preferred map[string]int
	bytes               map[string]int64
}

func loadOf(p Plan, nodes []string) load {
	l := load{replicas: map[string]int{}, preferred: map[string]int{}, bytes: map[string]int64{}}
	for _, n := range nodes {
		l.replicas[n], l.preferred[n], l.bytes[n] = 0, 0, 0
	}
	for _, g := range p {
		for i, r := range g.Replicas {
			l.replicas[r]++
			l.bytes[r] += g.Bytes
			if i == 0 {
				l.preferred[r]++
			}
		}
	}
	return l
}

// Bytes returns each node's bytes under p: the sum of the Bytes of the
// groups it holds a replica of.
func Bytes(p Plan, nodes []string) map[string]int64 {
	return loadOf(p, nodes).bytes
}

// Check reports whether p is a plan over nodes with factor rf: ids
// unique, ascending and above 0, every replica a node of nodes, distinct within a
// group, and min(rf, len(nodes)) replicas per group at most.
func Check(p Plan, nodes []string, rf int) error {
	if err := checkArgs(nodes, rf); err != nil {
		return err
	}
	known := map[string]bool{}
	for _, n := range nodes {
		known[n] = true
	}
	want := min(rf, len(nodes))
	for i, g := range p {
		if g.ID == 0 {
			return fmt.Errorf("%w: group 0 is the meta group, not placed", ErrInvalid)
		}
		if i > 0 && g.ID <= p[i-1].ID {
			return fmt.Errorf("%w: group ids %d and %d are not ascending", ErrInvalid, p[i-1].ID, g.ID)
		}
		if len(g.Replicas) == 0 || len(g.Replicas) > want {
			return fmt.Errorf("%w: group %d has %d replicas, want 1 to %d", ErrInvalid, g.ID, len(g.Replicas), want)
		}
		seen := map[string]bool{}
		for _, r := range g.Replicas {
			if !known[r] {
				return fmt.Errorf("%w: group %d: %q is no node", ErrInvalid, g.ID, r)
			}
			if seen[r] {
				return fmt.Errorf("%w: group %d holds %q twice", ErrInvalid, g.ID, r)
			}
			seen[r] = true
		}
	}
	return nil
}

// checkArgs checks a node list and a replication factor.
func checkArgs(nodes []string, rf int) error {
	if len(nodes) == 0 {
		return fmt.Errorf("%w: no nodes", ErrInvalid)
	}
	if rf < 1 {
		return fmt.Errorf("%w: replication factor %d", ErrInvalid, rf)
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		if n == "" || seen[n] {
			return fmt.Errorf("%w: node %q empty or listed twice", ErrInvalid, n)
		}
		seen[n] = true
	}
	return nil
}

// Grow returns p with add new groups, ids after p's highest (from 1: 0
// is the meta group, which placement does not place), each placed
// on min(rf, len(nodes)) distinct nodes: led by the node that leads the
// fewest groups, its other replicas on the nodes that hold the fewest.
func Grow(p Plan, nodes []string, add, rf int) (Plan, error) {
	if err := Check(p, nodes, rf); err != nil {
		return nil, err
	}
	if add < 0 {
		return nil, fmt.Errorf("%w: %d groups to add", ErrInvalid, add)
	}
	out := p.clone()
	l := loadOf(out, nodes)
	next := uint64(1)
	if len(out) > 0 {
		next = out[len(out)-1].ID + 1
	}
	want := min(rf, len(nodes))
	for range add {
		// The preferred leader first: the node that leads the fewest
		// (then holds the fewest, then the lowest id); then the other
		// replicas, the nodes that hold the fewest.
		lead := slices.Clone(nodes)
		sortBy(lead, l.preferred, l.replicas)
		rest := slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return n == lead[0] })
		sortBy(rest, l.replicas, l.preferred)
		replicas := append([]string{lead[0]}, rest[:want-1]...)
		for i, r := range replicas {
			l.replicas[r]++
			if i == 0 {
				l.preferred[r]++
			}
		}
		out = append(out, Group{ID: next, Replicas: slices.Clone(replicas)})
		next++
	}
	return out, nil
}

// sortBy sorts nodes by first, then second, then id, all ascending.
func sortBy(nodes []string, first, second map[string]int) {
	sort.SliceStable(nodes, func(i, j int) bool {
		a, b := nodes[i], nodes[j]
		if first[a] != first[b] {
			return first[a] < first[b]
		}
		if second[a] != second[b] {
			return second[a] < second[b]
		}
		return a < b
	})
}

// Join returns p once node joins nodes (which lists it): every group
// with fewer than min(rf, len(nodes)) replicas gains node as a replica,
// and node then becomes the preferred leader of groups it holds, taken
// from the nodes that lead the most, until it leads ⌊G/N⌋ or no node
// leads two more than it.
func Join(p Plan, nodes []string, node string, rf int) (Plan, error) {
	if !slices.Contains(nodes, node) {
		return nil, fmt.Errorf("%w: the joining node %q is not among the nodes", ErrInvalid, node)
	}
	if err := Check(p, nodes, rf); err != nil {
		return nil, err
	}
	out := p.clone()
	want := min(rf, len(nodes))
	for i := range out {
		if len(out[i].Replicas) < want && !slices.Contains(out[i].Replicas, node) {
			out[i].Replicas = append(out[i].Replicas, node)
		}
	}
	share := len(out) / len(nodes)
	l := loadOf(out, nodes)
	for l.preferred[node] < share {
		// The group node holds whose preferred leader leads the most
		// (the lowest id among equals).
		best := -1
		for i, g := range out {
			if g.Preferred() == node || !slices.Contains(g.Replicas, node) {
				continue
			}
			if best < 0 || l.preferred[g.Preferred()] > l.preferred[out[best].Preferred()] {
				best = i
			}
		}
		if best < 0 || l.preferred[out[best].Preferred()] <= l.preferred[node]+1 {
			break
		}
		g := &out[best]
		l.preferred[g.Preferred()]--
		l.preferred[node]++
		at := slices.Index(g.Replicas, node)
		g.Replicas[0], g.Replicas[at] = g.Replicas[at], g.Replicas[0]
	}
	return out, nil
}

// Remove returns p once node gone has left nodes (which no longer list
// it): in every group that holds gone, the node of nodes outside the
// group that holds the fewest replicas (then leads the fewest, then the
// lowest id) takes its place. A group whose preferred leader gone was
// gets as preferred leader the replica that leads the fewest groups
// (then holds the fewest, then the lowest id). A group with no node left
// to take the place keeps its other replicas.
func Remove(p Plan, nodes []string, gone string, rf int) (Plan, error) {
	if slices.Contains(nodes, gone) {
		return nil, fmt.Errorf("%w: the leaving node %q is still among the nodes", ErrInvalid, gone)
	}
	if err := Check(p, append(slices.Clone(nodes), gone), rf); err != nil {
		return nil, err
	}
	if err := checkArgs(nodes, rf); err != nil {
		return nil, err
	}
	out := p.clone()
	l := loadOf(out, nodes)
	for i := range out {
		g := &out[i]
		at := slices.Index(g.Replicas, gone)
		if at < 0 {
			continue
		}
		cands := slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return slices.Contains(g.Replicas, n) })
		if len(cands) == 0 {
			g.Replicas = slices.Delete(g.Replicas, at, at+1)
		} else {
			sortBy(cands, l.replicas, l.preferred)
			g.Replicas[at] = cands[0]
			l.replicas[cands[0]]++
		}
		if at == 0 && len(g.Replicas) > 0 {
			lead := slices.Clone(g.Replicas)
			sortBy(lead, l.preferred, l.replicas)
			j := slices.Index(g.Replicas, lead[0])
			g.Replicas[0], g.Replicas[j] = g.Replicas[j], g.Replicas[0]
			l.preferred[lead[0]]++
		}
	}
	return out, nil
}

// Evacuate returns p with the replicas of the nodes out (members of
// nodes that are to hold none: dead past a timeout, or drained) given to
// the other nodes: in each group, each replica of a node of out goes to
// the node outside the group and outside out that holds the fewest
// replicas (then leads the fewest, then the lowest id), as Remove does; a
// replica with no such node stays where it is (a later call moves it).
// A group led by a node of out gets as preferred leader a replica outside
// out that leads the fewest groups. ok is false when nothing changed.
func Evacuate(p Plan, nodes, out []string, rf int) (Plan, bool, error) {
	if err := Check(p, nodes, rf); err != nil {
		return nil, false, err
	}
	for _, o := range out {
		if !slices.Contains(nodes, o) {
			return nil, false, fmt.Errorf("%w: %q to evacuate is no node", ErrInvalid, o)
		}
	}
	live := slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return slices.Contains(out, n) })
	res := p.clone()
	l := loadOf(res, live)
	changed := false
	for i := range res {
		g := &res[i]
		for at, r := range g.Replicas {
			if !slices.Contains(out, r) {
				continue
			}
			cands := slices.DeleteFunc(slices.Clone(live), func(n string) bool { return slices.Contains(g.Replicas, n) })
			if len(cands) == 0 {
				continue
			}
			sortBy(cands, l.replicas, l.preferred)
			g.Replicas[at] = cands[0]
			l.replicas[cands[0]]++
			changed = true
		}
		if slices.Contains(out, g.Preferred()) {
			var lead []string
			for _, r := range g.Replicas {
				if !slices.Contains(out, r) {
					lead = append(lead, r)
				}
			}
			if len(lead) > 0 {
				sortBy(lead, l.preferred, l.replicas)
				j := slices.Index(g.Replicas, lead[0])
				g.Replicas[0], g.Replicas[j] = g.Replicas[j], g.Replicas[0]
				l.preferred[lead[0]]++
				changed = true
			}
		}
	}
	return res, changed, nil
}

// Move is one replica move of a Balance: node From's replica of group
// Group goes to node To; with Back, a swap, To's replica of group Back
// goes to From at the same time (bytes are evened without changing the
// nodes' replica counts).
type Move struct {
	Group    uint64
	From, To string
	Back     uint64
}

// Balance returns p with at most one replica moved (or two swapped, when
// evening bytes), and the move, when the
// replica counts of nodes are more than slack apart: a replica of the node
// that holds the most (then leads the most, then the highest id) goes to
// the node that holds the fewest (then leads the fewest, then the lowest
// id), from a group the receiving node does not hold (one the giver does
// not lead first, so leaderships stay; else it leads that group in its
// place; then the one that leaves their bytes closest; then the lowest
// id), never of a group that is Moving. When the counts are within the
// slack, a replica moves by bytes instead (bytesMove). Then, without moving data, a group's
// preferred leader hands the preference to another replica of the group
// while it leads more than one more group than that replica (the pair
// furthest apart first). ok is false when nothing changed. Grow and Join keep replicas
// within two, so a slack of 2 moves nothing after them; a node that joins
// a cluster whose groups are all at their factor gets its share this way.
func Balance(p Plan, nodes []string, rf, slack int) (Plan, Move, bool, error) {
	if err := Check(p, nodes, rf); err != nil {
		return nil, Move{}, false, err
	}
	out := p.clone()
	l := loadOf(out, nodes)
	var mv Move
	moved := false
	byLoad := slices.Clone(nodes)
	sortBy(byLoad, l.replicas, l.preferred)
	lo, hi := byLoad[0], byLoad[len(byLoad)-1]
	if l.replicas[hi]-l.replicas[lo] > max(slack, 1) {
		// Of the groups hi can give lo, one hi does not lead first; then
		// the one that leaves the two nodes' bytes closest.
		gap := func(g Group) int64 { return abs(l.bytes[hi] - l.bytes[lo] - 2*g.Bytes) }
		pick := -1
		for i, g := range out {
			if g.Moving || !slices.Contains(g.Replicas, hi) || slices.Contains(g.Replicas, lo) {
				continue
			}
			switch {
			case pick < 0:
				pick = i
			case (out[pick].Preferred() == hi) != (g.Preferred() == hi):
				if g.Preferred() != hi {
					pick = i
				}
			case gap(g) < gap(out[pick]):
				pick = i
			}
		}
		if pick >= 0 {
			g := &out[pick]
			g.Replicas[slices.Index(g.Replicas, hi)] = lo
			mv, moved = Move{Group: g.ID, From: hi, To: lo}, true
			l = loadOf(out, nodes)
		}
	}
	if !moved {
		if m, ok := bytesMove(out, nodes, l, slack); ok {
			// A preference moves with the replica; the hand-overs below
			// even the leaders' counts again.
			out.replace(m.Group, m.From, m.To)
			if m.Back != 0 {
				out.replace(m.Back, m.To, m.From)
			}
			mv, moved = m, true
			l = loadOf(out, nodes)
		}
	}
	prefChanged := false
	for {
		// The group whose preferred leader leads the most more than
		// one of its other replicas does, that pair the furthest apart
		// (the first such group by id among equals).
		gi, ri, best := -1, -1, 1
		for i, g := range out {
			for j, r := range g.Replicas[1:] {
				if d := l.preferred[g.Preferred()] - l.preferred[r]; d > best {
					gi, ri, best = i, j+1, d
				}
			}
		}
		if gi < 0 {
			break
		}
		g := &out[gi]
		l.preferred[g.Replicas[0]]--
		l.preferred[g.Replicas[ri]]++
		g.Replicas[0], g.Replicas[ri] = g.Replicas[ri], g.Replicas[0]
		prefChanged = true
	}
	return out, mv, moved || prefChanged, nil
}

// Balancing by bytes (Balance, once the replica counts are within the
// slack): the node with the most bytes gives one replica to a node with
// fewer when their bytes are more than BytesSlack apart, choosing the
// group that leaves the two closest, and only when that narrows their
// gap by at least half the slack and keeps every node's replica count
// within the slack; when it has no such replica to give (its groups would
// overshoot or narrow too little), the next fullest node gives instead.
// Each such move lowers the sum of the squares of the nodes' bytes, so
// balancing ends; the half-slack step is its hysteresis (groups that
// grow a little do not start moves back and forth).
const (
	// BytesSlackShare is the gap allowed between two nodes' bytes, as a
	// share of the mean bytes per node.
	BytesSlackShare = 0.10
	// MinBytesSlack is the smallest gap that moves a replica: below it a
	// move costs more than it evens.
	MinBytesSlack = 1 << 20
)

// BytesSlack returns the gap between two nodes' bytes that Balance lets
// stand for a mean of mean bytes per node.
func BytesSlack(mean int64) int64 {
	return max(int64(float64(mean)*BytesSlackShare), MinBytesSlack)
}

// replace puts node to in node from's place among group g's replicas.
func (p Plan) replace(g uint64, from, to string) {
	i := slices.IndexFunc(p, func(x Group) bool { return x.ID == g })
	p[i].Replicas[slices.Index(p[i].Replicas, from)] = to
}

// bytesMove returns the replica move that evens bytes (see above), ok
// false when none does. When no single move keeps the replica counts
// within the slack, it swaps: a larger group of the giver's for a smaller
// one of the receiver's.
func bytesMove(p Plan, nodes []string, l load, slack int) (Move, bool) {
	var total int64
	for _, n := range nodes {
		total += l.bytes[n]
	}
	if total == 0 || len(nodes) < 2 {
		return Move{}, false
	}
	bs := BytesSlack(total / int64(len(nodes)))
	byBytes := slices.Clone(nodes)
	sort.SliceStable(byBytes, func(i, j int) bool {
		a, b := byBytes[i], byBytes[j]
		if l.bytes[a] != l.bytes[b] {
			return l.bytes[a] < l.bytes[b]
		}
		return a < b
	})
	// The groups each node holds, by their place in p: a move's group is
	// one of the giver's, a swap's other one of the receiver's.
	held := map[string][]int{}
	for i, g := range p {
		for _, r := range g.Replicas {
			held[r] = append(held[r], i)
		}
	}
	movable := func(g Group, from, to string) bool {
		return !g.Moving && slices.Contains(g.Replicas, from) && !slices.Contains(g.Replicas, to)
	}
	last := len(byBytes) - 1
	for h := last; h > 0 && last-h < maxBytesGivers; h-- {
		hi := byBytes[h]
		if l.bytes[hi]-l.bytes[byBytes[0]] <= bs {
			break // sorted: every later giver is closer still
		}
		for k, lo := range byBytes[:h] {
			if k == maxBytesReceivers {
				break
			}
			d := l.bytes[hi] - l.bytes[lo]
			if d <= bs {
				break // sorted: every later node is closer still
			}
			pick, back, best := -1, -1, d-bs/2
			if countsFit(l, nodes, hi, lo, slack) {
				for _, i := range held[hi] {
					g := p[i]
					if g.Bytes <= 0 || !movable(g, hi, lo) {
						continue
					}
					if gap := abs(d - 2*g.Bytes); gap <= best && (pick < 0 || gap < best) {
						pick, best = i, gap
					}
				}
			} else {
				for _, i := range held[hi] {
					a := p[i]
					if !movable(a, hi, lo) {
						continue
					}
					for _, j := range held[lo] {
						b := p[j]
						if i == j || b.Bytes >= a.Bytes || !movable(b, lo, hi) {
							continue
						}
						if gap := abs(d - 2*(a.Bytes-b.Bytes)); gap <= best && (pick < 0 || gap < best) {
							pick, back, best = i, j, gap
						}
					}
				}
			}
			switch {
			case pick >= 0 && back >= 0:
				return Move{Group: p[pick].ID, From: hi, To: lo, Back: p[back].ID}, true
			case pick >= 0:
				return Move{Group: p[pick].ID, From: hi, To: lo}, true
			}
		}
	}
	return Move{}, false
}

// maxBytesGivers and maxBytesReceivers bound the nodes bytesMove tries
// as the giver, most bytes first, and for each the receiver, fewest bytes
// first.
const maxBytesGivers, maxBytesReceivers = 8, 8

// countsFit reports whether moving a replica from node from to node to
// keeps every node's replica count within slack of every other's.
func countsFit(l load, nodes []string, from, to string, slack int) bool {
	lo, hi := int(^uint(0)>>1), 0
	for _, n := range nodes {
		c := l.replicas[n]
		switch n {
		case from:
			c--
		case to:
			c++
		}
		lo, hi = min(lo, c), max(hi, c)
	}
	return hi-lo <= max(slack, 1)
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// Partitions returns the group of each of a new topic's partitions: round
// robin over p's groups from the one createIndex picks (the Raft index of
// the topic's creation, so each topic starts elsewhere).
func Partitions(p Plan, createIndex uint64, partitions int) ([]uint64, error) {
	if len(p) == 0 {
		return nil, fmt.Errorf("%w: no groups", ErrInvalid)
	}
	if partitions < 0 {
		return nil, fmt.Errorf("%w: %d partitions", ErrInvalid, partitions)
	}
	out := make([]uint64, partitions)
	start := int(createIndex % uint64(len(p)))
	for i := range out {
		out[i] = p[(start+i)%len(p)].ID
	}
	return out, nil
}
