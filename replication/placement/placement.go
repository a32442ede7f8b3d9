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
//     past a timeout, or drained) to the others, keeping the members: the
//     largest group's first, each to the node outside the group with the
//     fewest bytes of those within one replica of the node with the
//     fewest replicas (with no sizes known, to that node, as Remove does).
//   - Balance moves one replica at a time. While the nodes' replica
//     counts are more than a slack apart, to the node that holds the
//     fewest, from one that holds about the most, the group nearest in
//     bytes to the receiver's need per replica it still lacks (so that the
//     receiver fills to about the mean and its givers stay in the bytes
//     window). Once they are within it, while the nodes' bytes are more
//     than a tenth of the mean apart (BytesSlack), the move or swap that
//     brings the most bytes into the window of that width around the mean
//     for the bytes it copies. And it hands preferred leaderships over
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
	"cmp"
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
	// it); 0 when not known. Balance evens the nodes' bytes with it, and
	// Evacuate places by it.
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
// the other nodes, the largest group's (by Bytes) first: each goes to the
// node outside the group and outside out that has the fewest bytes (what
// Evacuate gave it counted) of those that hold at most one replica more
// than the one that holds the fewest (then leads the fewest, then the
// lowest id), which takes it when no sizes are known, as in Remove. So a
// large replica lands on a node with room for it, not on one that would
// then hold far more than the rest. A replica with no such node stays
// where it is (a later call moves it). A group led by a node of out gets
// as preferred leader a replica outside out that leads the fewest groups.
// ok is false when nothing changed.
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
	// The replicas to move, the largest group's first (by bytes when
	// known), each to the node outside the group and outside out with
	// the fewest bytes among those within one replica of the fewest.
	type replica struct{ g, at int }
	var todo []replica
	for i, g := range res {
		for at, r := range g.Replicas {
			if slices.Contains(out, r) {
				todo = append(todo, replica{i, at})
			}
		}
	}
	sort.SliceStable(todo, func(i, j int) bool { return res[todo[i].g].Bytes > res[todo[j].g].Bytes })
	for _, t := range todo {
		g := &res[t.g]
		cands := slices.DeleteFunc(slices.Clone(live), func(n string) bool { return slices.Contains(g.Replicas, n) })
		if len(cands) == 0 {
			continue
		}
		sortBy(cands, l.replicas, l.preferred)
		fewest := l.replicas[cands[0]]
		to := cands[0]
		for _, c := range cands[1:] {
			if l.replicas[c] <= fewest+1 && l.bytes[c] < l.bytes[to] {
				to = c
			}
		}
		g.Replicas[t.at] = to
		l.replicas[to]++
		l.bytes[to] += g.Bytes
		changed = true
	}
	for i := range res {
		g := &res[i]
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
// evening bytes), and the move, never one of a group that is Moving.
// While the replica counts of nodes are more than slack apart, a replica
// goes to the node that holds the fewest (then leads the fewest, then the
// lowest id) (countMove); once they are within it, a replica moves, or
// two swap, by bytes instead (bytesMove). Then, without moving data, a
// group's preferred leader hands the preference to another replica of the
// group while it leads more than one more group than that replica (the
// pair furthest apart first). ok is false when nothing changed. Grow and
// Join keep replicas within two, so a slack of 2 moves nothing after
// them; a node that joins a cluster whose groups are all at their factor
// gets its share this way.
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
		if m, ok := countMove(out, nodes, l, byLoad, slack); ok {
			out.replace(m.Group, m.From, m.To)
			mv, moved = m, true
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

// countMove returns the move that evens replica counts: to lo, the node
// that holds the fewest (byLoad[0]), from a node that holds at least two
// more than lo and at least one less than the most, of a group lo does
// not hold and that is not Moving. Of those, one the giver does not lead
// first (leaderships stay); then the group whose bytes come nearest lo's
// need, plus what the move would take the giver below the bytes window
// (bytesMove); then the giver that holds the most (then leads the most,
// then the highest id); then the lowest group. lo's need is the bytes it
// lacks to a quarter of the bytes slack below the mean, over the replicas
// it lacks to be within the slack of the most: a move of the group that
// leaves the pair's bytes closest, which with an empty receiver is the
// giver's largest, overfills lo and drops its givers below the window,
// and balancing by bytes then refills them from the fullest nodes, a
// cascade. With no sizes known every group fits alike, and the node that
// holds the most gives.
func countMove(p Plan, nodes []string, l load, byLoad []string, slack int) (Move, bool) {
	lo := byLoad[0]
	most := l.replicas[byLoad[len(byLoad)-1]]
	rank := map[string]int{}
	for i, n := range byLoad {
		rank[n] = i
	}
	var total int64
	for _, n := range nodes {
		total += l.bytes[n]
	}
	mean := total / int64(len(nodes))
	bs := BytesSlack(mean)
	floor := mean - bs/2
	lacks := max(1, most-max(slack, 1)-l.replicas[lo])
	need := (mean - bs/4 - l.bytes[lo]) / int64(lacks)
	type cand struct {
		i     int
		from  string
		miss  int64 // how far the group is from what lo needs
		leads bool
	}
	var best *cand
	better := func(a, b cand) bool {
		switch {
		case a.leads != b.leads:
			return !a.leads
		case a.miss != b.miss:
			return a.miss < b.miss
		case a.from != b.from:
			return rank[a.from] > rank[b.from]
		}
		return a.i < b.i
	}
	for i, g := range p {
		if g.Moving || slices.Contains(g.Replicas, lo) {
			continue
		}
		for _, r := range g.Replicas {
			if c := l.replicas[r]; c < l.replicas[lo]+2 || c < most-1 {
				continue
			}
			k := cand{i: i, from: r, miss: abs(g.Bytes - need), leads: g.Preferred() == r}
			if left := l.bytes[r] - g.Bytes; left < floor {
				k.miss += floor - left
			}
			if best == nil || better(k, *best) {
				best = &k
			}
		}
	}
	if best == nil {
		return Move{}, false
	}
	return Move{Group: p[best.i].ID, From: best.from, To: lo}, true
}

// Balancing by bytes (Balance, once the replica counts are within the
// slack) starts when the nodes' bytes are more than BytesSlack apart, and
// aims at the window of that width around their mean. A move's gain is
// the bytes it brings into the window (how far the two nodes' bytes lie
// outside it, before less after), its cost the bytes it copies (a swap
// copies both groups); of the moves that gain at least an eighth of the
// slack it makes the one whose gain less 0.95 times its cost is highest
// (then the one that leaves the pair closest). So a move from a node above
// the window to one below gains up to twice its bytes, one that overfills
// its receiver or takes its giver past the window loses what it spills,
// and of two moves that spill nothing the larger wins: a node sheds its
// excess in a few moves that land within the window, rather than evening
// pairs and moving groups twice. Each move takes fewer bytes from the
// giver than it held above the receiver, so it lowers the sum of the
// squares of the nodes' bytes and balancing ends; the gain of an eighth
// of the slack is its hysteresis (groups that grow a little do not start
// moves back and forth), and it may stop with the nodes a little more than
// the slack apart.
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

// bytesMove returns the replica move, or swap, that evens bytes (see
// above), ok false when none does. A move keeps every node's replica
// count within the slack of every other's; a swap, a larger group of the
// giver's for a smaller one, leaves the counts alone (the only way a giver
// at the fewest replicas sheds bytes).
func bytesMove(p Plan, nodes []string, l load, slack int) (Move, bool) {
	var total int64
	for _, n := range nodes {
		total += l.bytes[n]
	}
	if total == 0 || len(nodes) < 2 {
		return Move{}, false
	}
	mean := total / int64(len(nodes))
	bs := BytesSlack(mean)
	byBytes := slices.Clone(nodes)
	sort.SliceStable(byBytes, func(i, j int) bool {
		a, b := byBytes[i], byBytes[j]
		if l.bytes[a] != l.bytes[b] {
			return l.bytes[a] < l.bytes[b]
		}
		return a < b
	})
	last := len(byBytes) - 1
	if l.bytes[byBytes[last]]-l.bytes[byBytes[0]] <= bs {
		return Move{}, false
	}
	// The groups each node holds, by their place in p; and the groups
	// not moving by size, for the swaps' back groups.
	held := map[string][]int{}
	var bySize []int
	for i, g := range p {
		for _, r := range g.Replicas {
			held[r] = append(held[r], i)
		}
		if !g.Moving {
			bySize = append(bySize, i)
		}
	}
	sort.SliceStable(bySize, func(i, j int) bool { return p[bySize[i]].Bytes < p[bySize[j]].Bytes })
	movable := func(g Group, from, to string) bool {
		return !g.Moving && slices.Contains(g.Replicas, from) && !slices.Contains(g.Replicas, to)
	}
	// countsFit reports whether a replica moved from node from to node
	// to keeps every node's replica count within the slack of every
	// other's (by the nodes at each count).
	at := map[int]int{}
	fewest, most := l.replicas[nodes[0]], l.replicas[nodes[0]]
	for _, n := range nodes {
		c := l.replicas[n]
		at[c]++
		fewest, most = min(fewest, c), max(most, c)
	}
	countsFit := func(from, to string) bool {
		f, t := l.replicas[from], l.replicas[to]
		lo, hi := min(f-1, t+1), max(f-1, t+1)
		at[f]--
		at[t]--
		for c := fewest; c <= most; c++ {
			if at[c] > 0 {
				lo = min(lo, c)
				break
			}
		}
		for c := most; c >= fewest; c-- {
			if at[c] > 0 {
				hi = max(hi, c)
				break
			}
		}
		at[f]++
		at[t]++
		return hi-lo <= max(slack, 1)
	}
	lower, upper := mean-bs/2, mean+bs/2
	// outside is how far b bytes lie outside the window [lower, upper].
	outside := func(b int64) int64 { return max(0, lower-b, b-upper) }
	minGain := int64(float64(bs) * minGainShare)
	type cand struct {
		mv         Move
		gain, cost int64 // bytes brought into the window; bytes copied
		apart      int64 // the pair's gap after the move
	}
	var best *cand
	better := func(a, b cand) bool {
		if x, y := float64(a.gain)-byteCostWeight*float64(a.cost), float64(b.gain)-byteCostWeight*float64(b.cost); x != y {
			return x > y
		}
		return a.apart < b.apart
	}
	// consider weighs moving net bytes from hi to lo at a copy of cost.
	consider := func(hi, lo string, net, cost int64, mv Move) {
		d := l.bytes[hi] - l.bytes[lo]
		if net <= 0 || net >= d {
			return // the sum of the squares would not fall
		}
		gain := outside(l.bytes[hi]) + outside(l.bytes[lo]) - outside(l.bytes[hi]-net) - outside(l.bytes[lo]+net)
		k := cand{mv: mv, gain: gain, cost: cost, apart: abs(d - 2*net)}
		if gain >= minGain && (best == nil || better(k, *best)) {
			best = &k
		}
	}
	for h := last; h > 0 && last-h < maxBytesGivers; h-- {
		hi := byBytes[h]
		if l.bytes[hi]-l.bytes[byBytes[0]] <= bs {
			break // sorted: every later giver is closer still
		}
		for _, lo := range byBytes[:h] {
			if !countsFit(hi, lo) {
				continue
			}
			for _, i := range held[hi] {
				if g := p[i]; movable(g, hi, lo) {
					consider(hi, lo, g.Bytes, g.Bytes, Move{Group: g.ID, From: hi, To: lo})
				}
			}
		}
		for _, i := range held[hi] {
			a := p[i]
			swap := func(j int, lo string) {
				if b := p[j]; b.Bytes < a.Bytes && lo != hi && movable(a, hi, lo) && movable(b, lo, hi) {
					consider(hi, lo, a.Bytes-b.Bytes, a.Bytes+b.Bytes, Move{Group: a.ID, From: hi, To: lo, Back: b.ID})
				}
			}
			for _, lo := range byBytes[:min(h, maxBytesReceivers)] {
				for _, j := range held[lo] {
					swap(j, lo)
				}
			}
			back := func(from, to int) {
				for _, j := range bySize[from:max(from, min(to, len(bySize)))] {
					for _, lo := range p[j].Replicas {
						swap(j, lo)
					}
				}
			}
			near, _ := slices.BinarySearchFunc(bySize, a.Bytes-(l.bytes[hi]-mean), func(j int, b int64) int { return cmp.Compare(p[j].Bytes, b) })
			back(0, maxBackGroups)
			back(min(len(bySize), max(maxBackGroups, near-maxNearGroups)), near+maxNearGroups)
		}
	}
	if best == nil {
		return Move{}, false
	}
	return best.mv, true
}

const (
	// minGainShare is the share of the bytes slack a move must bring into
	// the window.
	minGainShare = 1.0 / 8
	// byteCostWeight weighs a move's copied bytes against its gain: under
	// one, so that of two moves that spill nothing the larger wins.
	byteCostWeight = 0.95
	// bytesMove tries maxBytesGivers givers, most bytes first; for each,
	// swaps with the groups of the maxBytesReceivers nodes with the fewest
	// bytes, the maxBackGroups smallest groups, and the 2*maxNearGroups
	// groups nearest the size that leaves the giver at the mean.
	maxBytesGivers, maxBytesReceivers, maxBackGroups, maxNearGroups = 8, 8, 32, 8
)

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
