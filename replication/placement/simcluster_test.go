package placement

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// The control-plane simulation (TestSimulatedCluster, sim_test.go): a
// seeded, deterministic discrete-event loop on a virtual clock that
// drives this package's functions as the meta leader does
// (replication/data_groups.go: place, plan, balance, settleMoves,
// moveTimeoutFor) and models what the nodes do with the table. Nothing
// sleeps; the clock jumps to the next thing that can change what the meta
// leader decides.
//
//   - The meta leader passes every tick. A pass that clears the marks of
//     finished moves does nothing else; else one that places (a node that
//     joined or left the configuration, the replicas of dead and drained
//     nodes: Join, Grow, Remove, Evacuate) proposes that; else one
//     balancing step (Balance, with the groups' sizes and moving marks),
//     when fewer than max-moves marked moves are younger than their
//     timeout. Every change of a group's replicas marks it moving (merged
//     into a mark it has).
//   - A replica the table lists and the group's voters lack is copied to
//     its node: the group's bytes when the copy starts (what the group
//     takes in meanwhile comes through Raft, outside the budget), within
//     the node's move budget (--move-bytes-per-second), which the copies
//     to one node share equally (the token bucket serves readers in
//     arrival order). A copy progresses while its node is up and the group
//     has a majority of its voters up.
//   - Once every listed replica is copied, the group's leader promotes
//     each and then removes the replicas no longer listed, one pass per
//     change: only then do the voters become the listed replicas (a move
//     adds before it removes).
//   - Balance sees the sizes of the last refresh (simConfig.SizeRefresh),
//     as the meta leader's cache of group sizes.
//   - Not modelled: elections and a change of meta leader, Raft's own
//     traffic, the bandwidth of the nodes copied from, a copy that fails
//     and starts again.

// simConfig is what a simulation runs with.
type simConfig struct {
	// Nodes and Groups are the cluster at the start: n1..nN, and Groups
	// groups placed by Grow and balanced at once (the start is settled).
	Nodes, Groups int
	// RF, Slack and PerNode are --replication-factor, the balancing
	// slack (replication's balanceSlack) and --data-groups-per-node.
	RF, Slack, PerNode int
	// MaxMoves is --max-moves.
	MaxMoves int
	// Rate is --move-bytes-per-second, each receiving node's budget.
	Rate float64
	// Tick is the meta leader's pass, and a group leader's.
	Tick time.Duration
	// SizeRefresh is how often the sizes Balance sees are refreshed.
	SizeRefresh time.Duration
	// DeadNodeTimeout is --dead-node-timeout.
	DeadNodeTimeout time.Duration
	// Seed chooses the groups' sizes and growth.
	Seed uint64
	// Balance is the balancer the meta leader calls: Balance, unless a
	// test puts a broken one here to see the checks fail.
	Balance func(p Plan, nodes []string, rf, slack int) (Plan, Move, bool, error)
}

// Settings of the production code the simulation mirrors (package
// replication, which imports this one).
const (
	simTick        = 250 * time.Millisecond // dataGroupTick
	simMoveTimeout = 10 * time.Minute       // moveTimeout
	simDeadTimeout = 5 * time.Minute        // DefaultDeadNodeTimeout
	simRate        = 32 << 20               // catchup.DefaultMoveBytesPerSecond
	simSlack       = 2                      // balanceSlack
)

// simMoveTimeoutFor is replication's moveTimeoutFor: how long a move of a
// group of size bytes counts against max-moves.
func simMoveTimeoutFor(size int64, rate float64) time.Duration {
	if rate <= 0 || size <= 0 {
		return simMoveTimeout
	}
	return max(simMoveTimeout, 2*time.Duration(float64(size)/rate*float64(time.Second)))
}

// simGroup is one group's state beside the table.
type simGroup struct {
	// voters are the nodes that hold the group's data and vote.
	voters []string
	// built are the listed non-voters whose copy finished.
	built []string
	// The group's size is base bytes at baseAt, growing by rate bytes a
	// second.
	base, rate float64
	baseAt     time.Duration
	// hot marks a group of hot partitions: large, and growing fast.
	hot bool
	// move is the table's mark (nil: not moving); why the reason of the
	// last change of its replicas.
	move *simMove
	why  string
	// doneAt is when the voters become the listed replicas, once all are
	// copied; -1 before.
	doneAt time.Duration
	// underSince is since when fewer than the factor of its voters are
	// up; -1: not.
	underSince time.Duration
}

// simMove is a group's move mark (fsm.ReplicaMove).
type simMove struct {
	since  time.Duration
	reason string
	// added are the replicas the group gains (the mark's Added).
	added []string
}

// simCopy is a replica being copied to node.
type simCopy struct {
	group     int
	node      string
	remaining float64
	// reason is that of the change that listed the replica.
	reason string
}

// simNode is a member's state.
type simNode struct {
	alive    bool
	diedAt   time.Duration
	draining bool
}

// simStats are what a run counted; since gives those of a stretch.
type simStats struct {
	// Copied is the bytes copied within the move budgets (a copy given
	// up half way counts what it copied); CopiedFor splits them by the
	// reason of the move, CopiedTo by receiving node.
	Copied    float64
	CopiedFor map[string]float64
	CopiedTo  map[string]float64
	// Added counts the replicas the tables added to groups, by reason.
	Added map[string]int
	// Merged counts the changes to a group already moving (merged into
	// its mark).
	Merged int
	// UnderGroupSeconds sums, over groups, the time fewer than the
	// factor of their voters were up.
	UnderGroupSeconds float64
	// MaxBalancing is the most balancing steps unfinished at once.
	MaxBalancing int
}

func newSimStats() simStats {
	return simStats{CopiedFor: map[string]float64{}, CopiedTo: map[string]float64{}, Added: map[string]int{}}
}

// since is what s counted after o (MaxBalancing: s's).
func (s simStats) since(o simStats) simStats {
	d := newSimStats()
	d.Copied, d.Merged = s.Copied-o.Copied, s.Merged-o.Merged
	d.UnderGroupSeconds, d.MaxBalancing = s.UnderGroupSeconds-o.UnderGroupSeconds, s.MaxBalancing
	for k, v := range s.CopiedFor {
		if v -= o.CopiedFor[k]; v != 0 {
			d.CopiedFor[k] = v
		}
	}
	for k, v := range s.CopiedTo {
		if v -= o.CopiedTo[k]; v != 0 {
			d.CopiedTo[k] = v
		}
	}
	for k, v := range s.Added {
		if v -= o.Added[k]; v != 0 {
			d.Added[k] = v
		}
	}
	return d
}

func (s simStats) clone() simStats {
	c := s
	c.CopiedFor, c.CopiedTo, c.Added = maps.Clone(s.CopiedFor), maps.Clone(s.CopiedTo), maps.Clone(s.Added)
	return c
}

// moves counts the replicas added.
func (s simStats) moves() int {
	n := 0
	for _, v := range s.Added {
		n += v
	}
	return n
}

// simCluster is the simulated cluster and its meta leader.
type simCluster struct {
	cfg simConfig
	now time.Duration

	// config are the meta group's voters, in order; nodes the table's
	// placed nodes; plan the table's groups, and groups their state (by
	// the same index).
	config []string
	nodes  []string
	state  map[string]*simNode
	plan   Plan
	groups []*simGroup
	copies []*simCopy

	// sizes are the groups' sizes as the meta leader last learnt them,
	// at sizesAt, its refreshes-th refresh.
	sizes     []int64
	sizesAt   time.Duration
	refreshes int

	// balancing are the groups of each unfinished balancing step.
	balancing [][]uint64
	// idle is whether the last pass proposed nothing.
	idle bool

	stats        simStats
	violations   []string
	balanceCalls int
}

// newSimCluster returns a settled cluster of cfg.Nodes nodes and
// cfg.Groups groups, sized by cfg.Seed: a log-normal body around 1 GiB
// (a tenth under 0.4 GiB, a tenth over 2.8 GiB) growing by up to 4 KiB/s,
// and one group in 50 hot: 8 to 24 GiB, growing by 128 KiB/s.
func newSimCluster(cfg simConfig) (*simCluster, error) {
	if cfg.Balance == nil {
		cfg.Balance = Balance
	}
	s := &simCluster{cfg: cfg, state: map[string]*simNode{}, stats: newSimStats()}
	s.nodes = nodesN(cfg.Nodes)
	s.config = slices.Clone(s.nodes)
	for _, n := range s.nodes {
		s.state[n] = &simNode{alive: true}
	}
	p, err := Grow(nil, s.nodes, cfg.Groups, cfg.RF)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x51a))
	for range p {
		g := &simGroup{doneAt: -1, underSince: -1}
		if rng.IntN(50) == 0 {
			g.base, g.rate, g.hot = float64(8+rng.IntN(17))*(1<<30), 128<<10, true
		} else {
			g.base, g.rate = math.Exp(rng.NormFloat64()*0.8)*(1<<30), float64(rng.IntN(4<<10+1))
		}
		s.groups = append(s.groups, g)
	}
	s.plan = p
	s.refreshSizes()
	for step := 0; ; step++ {
		if step == 100_000 {
			return nil, fmt.Errorf("the start does not settle")
		}
		q, _, changed, err := cfg.Balance(s.withSizes(), s.nodes, cfg.RF, cfg.Slack)
		if err != nil {
			return nil, err
		}
		if !changed {
			break
		}
		s.plan = q
	}
	for i := range s.plan {
		s.plan[i].Bytes, s.plan[i].Moving = 0, false
		s.groups[i].voters = slices.Clone(s.plan[i].Replicas)
	}
	s.check()
	return s, nil
}

// bytes is group i's size now.
func (s *simCluster) bytes(i int) float64 {
	g := s.groups[i]
	return g.base + g.rate*(s.now-g.baseAt).Seconds()
}

// resize sets group i's size now to b.
func (s *simCluster) resize(i int, b float64) {
	s.groups[i].base, s.groups[i].baseAt = b, s.now
}

func (s *simCluster) refreshSizes() {
	s.sizes = make([]int64, len(s.groups))
	for i := range s.groups {
		s.sizes[i] = int64(s.bytes(i))
	}
	s.sizesAt = s.now
	s.refreshes++
}

// withSizes is the table as the meta leader hands it to Balance: with the
// sizes it learnt, and the moving groups marked.
func (s *simCluster) withSizes() Plan {
	p := s.plan.clone()
	for i := range p {
		p[i].Bytes, p[i].Moving = s.sizes[i], s.groups[i].move != nil
	}
	return p
}

// nodeBytes is each placed node's bytes in the table, with the groups'
// sizes size gives (their sizes now, when nil).
func (s *simCluster) nodeBytes(size func(i int) float64) map[string]float64 {
	if size == nil {
		size = s.bytes
	}
	out := map[string]float64{}
	for _, n := range s.nodes {
		out[n] = 0
	}
	for i, g := range s.plan {
		b := size(i)
		for _, r := range g.Replicas {
			out[r] += b
		}
	}
	return out
}

func (s *simCluster) violate(format string, args ...any) {
	if len(s.violations) < 20 {
		s.violations = append(s.violations, fmt.Sprintf("at %s: ", s.now)+fmt.Sprintf(format, args...))
	}
}

// out are the placed nodes that are to hold no replica (dead past the
// timeout, or draining), and dead those of them that are dead.
func (s *simCluster) out() (out, dead []string) {
	for _, n := range s.nodes {
		st := s.state[n]
		switch {
		case !st.alive && s.now-st.diedAt > s.cfg.DeadNodeTimeout:
			dead = append(dead, n)
			out = append(out, n)
		case st.draining:
			out = append(out, n)
		}
	}
	return out, dead
}

// without is nodes without out.
func without(nodes, out []string) []string {
	return slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return slices.Contains(out, n) })
}

// pass is one pass of the meta leader (data_groups.go, place); it reports
// whether it proposed a table.
func (s *simCluster) pass() bool {
	// settleMoves: the marks of the finished moves are cleared, and the
	// pass ends there.
	settled := false
	for i, g := range s.groups {
		if g.move != nil && g.doneAt < 0 && sameSet(g.voters, s.plan[i].Replicas) {
			g.move = nil
			settled = true
		}
	}
	if settled {
		s.balancing = slices.DeleteFunc(s.balancing, func(step []uint64) bool {
			return !slices.ContainsFunc(step, func(id uint64) bool { return s.groups[s.index(id)].move != nil })
		})
		return true
	}
	out, dead := s.out()
	// plan: the nodes that left the configuration, the voters not placed
	// yet, then the replicas of out nodes. The production pass calls
	// Evacuate every time; here only when an out node holds a replica,
	// the only case in which it changes anything.
	holds := slices.ContainsFunc(s.plan, func(g Group) bool {
		return slices.ContainsFunc(g.Replicas, func(r string) bool { return slices.Contains(out, r) })
	})
	if !holds && slices.Equal(s.config, s.nodes) {
		return s.balance(out)
	}
	p := s.plan.clone()
	nodes := slices.Clone(s.nodes)
	var why []string
	for _, id := range s.nodes {
		if slices.Contains(s.config, id) {
			continue
		}
		nodes = slices.DeleteFunc(nodes, func(n string) bool { return n == id })
		var err error
		if p, err = Remove(p, nodes, id, s.cfg.RF); err != nil {
			s.violate("remove %s: %v", id, err)
			return false
		}
		why = append(why, "node "+id+" removed")
	}
	for _, id := range s.config {
		if slices.Contains(nodes, id) {
			continue
		}
		nodes = append(nodes, id)
		var err error
		if p, err = Join(p, nodes, id, s.cfg.RF); err != nil {
			s.violate("join %s: %v", id, err)
			return false
		}
		grow := without(nodes, out)
		if Check(p, grow, s.cfg.RF) != nil {
			grow = nodes
		}
		if p, err = Grow(p, grow, s.cfg.PerNode, s.cfg.RF); err != nil {
			s.violate("grow for %s: %v", id, err)
			return false
		}
		why = append(why, "node "+id+" joined")
	}
	var leave []string
	for _, id := range out {
		if slices.Contains(nodes, id) {
			leave = append(leave, id)
		}
	}
	if len(leave) > 0 && len(p) > 0 {
		// As plan: with the sizes the meta leader learnt (a new group's
		// is 0).
		for i := range p {
			if i < len(s.sizes) {
				p[i].Bytes = s.sizes[i]
			}
		}
		q, moved, err := Evacuate(p, nodes, leave, s.cfg.RF)
		if err != nil {
			s.violate("evacuate %v: %v", leave, err)
			return false
		}
		if moved {
			p = q
			for _, id := range leave {
				if slices.Contains(dead, id) {
					why = append(why, "node "+id+" not heard from")
				} else {
					why = append(why, "node "+id+" drained")
				}
			}
		}
	}
	if len(why) == 0 {
		return s.balance(out)
	}
	for i := range p {
		p[i].Bytes = 0
	}
	s.nodes = nodes
	s.propose(p, strings.Join(why, ", "))
	return true
}

// balance is data_groups.go's balance: one Balance step over the nodes
// not out, when fewer than max-moves marked moves are younger than their
// timeout. It checks that the step moves one replica, or swaps two, of
// groups not moving.
func (s *simCluster) balance(out []string) bool {
	if s.cfg.MaxMoves < 0 {
		return false
	}
	// As balance: a move is timed on the bytes of every marked move to
	// the same node, which share its budget.
	toNode := map[string]int64{}
	for i, g := range s.groups {
		if g.move != nil {
			for _, id := range g.move.added {
				toNode[id] += s.sizes[i]
			}
		}
	}
	inFlight := 0
	for i, g := range s.groups {
		if g.move == nil {
			continue
		}
		shared := s.sizes[i]
		for _, id := range g.move.added {
			shared = max(shared, toNode[id])
		}
		if s.now-g.move.since < simMoveTimeoutFor(shared, s.cfg.Rate) {
			inFlight++
		}
	}
	if inFlight >= max(s.cfg.MaxMoves, 1) {
		return false
	}
	// Not while an out node still holds a replica (production: Check of
	// the table over the live nodes).
	live := without(s.nodes, out)
	if len(live) == 0 || slices.ContainsFunc(s.plan, func(g Group) bool {
		return slices.ContainsFunc(g.Replicas, func(r string) bool { return slices.Contains(out, r) })
	}) {
		return false
	}
	p := s.withSizes()
	s.balanceCalls++
	q, mv, changed, err := s.cfg.Balance(p, live, s.cfg.RF, s.cfg.Slack)
	if err != nil {
		s.violate("balance: %v", err)
		return false
	}
	if !changed {
		return false
	}
	var step []uint64
	for _, id := range []uint64{mv.Group, mv.Back} {
		if id == 0 {
			continue
		}
		if g := s.groups[s.index(id)]; g.move != nil {
			s.violate("balancing moves group %d, which is moving (%s since %s): %+v", id, g.move.reason, g.move.since, mv)
		}
		step = append(step, id)
	}
	changedGroups := 0
	for i := range q {
		q[i].Bytes, q[i].Moving = 0, false
		if i < len(s.plan) && !sameSet(q[i].Replicas, s.plan[i].Replicas) {
			changedGroups++
		}
	}
	if len(q) != len(s.plan) || changedGroups != len(step) {
		s.violate("a balancing step %+v changed %d groups (and %d to %d groups)", mv, changedGroups, len(s.plan), len(q))
	}
	if len(step) > 0 {
		s.balancing = append(s.balancing, step)
	}
	s.propose(q, "balance")
	return true
}

// propose makes p the table: a group whose replicas change is marked
// moving (merged into its mark if it has one), a new group starts on its
// replicas, and the listed replicas that do not vote start copying.
func (s *simCluster) propose(p Plan, why string) {
	for i := range p {
		if i >= len(s.plan) {
			// A new group (Grow): its replicas start it, empty.
			s.groups = append(s.groups, &simGroup{voters: slices.Clone(p[i].Replicas), rate: 4 << 10, baseAt: s.now, doneAt: -1, underSince: -1})
			s.sizes = append(s.sizes, 0)
			continue
		}
		old, next := s.plan[i].Replicas, p[i].Replicas
		if sameSet(old, next) {
			continue
		}
		var added []string
		for _, r := range next {
			if !slices.Contains(old, r) {
				s.stats.Added[why]++
				added = append(added, r)
			}
		}
		g := s.groups[i]
		g.why = why
		if g.move != nil {
			s.stats.Merged++
			g.move.added = append(g.move.added, added...)
			continue
		}
		g.move = &simMove{since: s.now, reason: why, added: added}
	}
	s.plan = p
	for i := range s.plan {
		s.reconcile(i)
	}
	s.check()
}

// reconcile starts the copies group i's table entry asks for, drops those
// it no longer does, and sets when its voters become its replicas.
func (s *simCluster) reconcile(i int) {
	g, want := s.groups[i], s.plan[i].Replicas
	s.copies = slices.DeleteFunc(s.copies, func(c *simCopy) bool { return c.group == i && !slices.Contains(want, c.node) })
	g.built = slices.DeleteFunc(g.built, func(n string) bool { return !slices.Contains(want, n) })
	pending := false
	for _, r := range want {
		if slices.Contains(g.voters, r) || slices.Contains(g.built, r) {
			continue
		}
		pending = true
		if !slices.ContainsFunc(s.copies, func(c *simCopy) bool { return c.group == i && c.node == r }) {
			s.copies = append(s.copies, &simCopy{group: i, node: r, remaining: s.bytes(i), reason: g.why})
		}
	}
	switch {
	case pending || sameSet(g.voters, want):
		g.doneAt = -1
	case g.doneAt < 0:
		// Every listed replica is copied: the group's leader promotes
		// each and removes each replica no longer listed, a pass apiece.
		changes := 0
		for _, r := range want {
			if !slices.Contains(g.voters, r) {
				changes++
			}
		}
		for _, r := range g.voters {
			if !slices.Contains(want, r) {
				changes++
			}
		}
		g.doneAt = s.now + time.Duration(changes)*s.cfg.Tick
	}
}

// copying reports whether c progresses: its node is up and its group has
// a leader (a majority of its voters up).
func (s *simCluster) copying(c *simCopy) bool {
	return s.state[c.node].alive && s.liveVoters(c.group) > len(s.groups[c.group].voters)/2
}

func (s *simCluster) liveVoters(i int) int {
	n := 0
	for _, v := range s.groups[i].voters {
		if s.state[v].alive {
			n++
		}
	}
	return n
}

// shares returns, for each node, how many copies share its budget.
func (s *simCluster) shares() map[string]int {
	per := map[string]int{}
	for _, c := range s.copies {
		if s.copying(c) {
			per[c.node]++
		}
	}
	return per
}

// advance moves the clock to t, finishing the copies and the groups'
// changes due on the way, in time order.
func (s *simCluster) advance(t time.Duration) {
	for s.now < t {
		per := s.shares()
		next := t
		for _, c := range s.copies {
			if n := per[c.node]; n > 0 && s.copying(c) {
				next = min(next, s.now+time.Duration(math.Ceil(c.remaining/(s.cfg.Rate/float64(n))*float64(time.Second))))
			}
		}
		for _, g := range s.groups {
			if g.doneAt >= 0 {
				next = min(next, max(g.doneAt, s.now))
			}
		}
		dt := (next - s.now).Seconds()
		for _, c := range s.copies {
			if n := per[c.node]; n > 0 && s.copying(c) {
				got := min(c.remaining, s.cfg.Rate/float64(n)*dt)
				c.remaining -= got
				s.stats.Copied += got
				s.stats.CopiedFor[c.reason] += got
				s.stats.CopiedTo[c.node] += got
			}
		}
		s.now = next
		var done []int
		s.copies = slices.DeleteFunc(s.copies, func(c *simCopy) bool {
			if c.remaining >= 1 {
				return false
			}
			g := s.groups[c.group]
			g.built = append(g.built, c.node)
			done = append(done, c.group)
			return true
		})
		for _, i := range done {
			s.reconcile(i)
		}
		for i, g := range s.groups {
			if g.doneAt >= 0 && g.doneAt <= s.now {
				s.finish(i)
			}
		}
	}
}

// finish makes group i's voters its listed replicas: the new ones were
// promoted, the old ones go.
func (s *simCluster) finish(i int) {
	g := s.groups[i]
	before := s.liveVoters(i)
	g.voters = slices.Clone(s.plan[i].Replicas)
	g.built, g.doneAt = nil, -1
	if after := s.liveVoters(i); after < min(before, s.cfg.RF) {
		s.violate("group %d's move left %d of its voters up, from %d", s.plan[i].ID, after, before)
	}
	s.checkGroup(i)
}

// check tests the invariants over the table (each group's replicas
// distinct placed nodes, as many as the factor) and every group.
func (s *simCluster) check() {
	placed := map[string]bool{}
	for _, n := range s.nodes {
		placed[n] = true
	}
	for i, g := range s.plan {
		if len(g.Replicas) != s.cfg.RF {
			s.violate("group %d has %d replicas", g.ID, len(g.Replicas))
		}
		for j, r := range g.Replicas {
			if !placed[r] || slices.Contains(g.Replicas[j+1:], r) {
				s.violate("group %d has replicas %v over nodes %v", g.ID, g.Replicas, s.nodes)
			}
		}
		if i > 0 && g.ID <= s.plan[i-1].ID {
			s.violate("group ids %d and %d are not ascending", s.plan[i-1].ID, g.ID)
		}
		s.checkGroup(i)
	}
	if n := len(s.balancing); n > max(s.cfg.MaxMoves, 1) {
		s.violate("%d balancing steps in flight, --max-moves is %d", n, s.cfg.MaxMoves)
	}
	s.stats.MaxBalancing = max(s.stats.MaxBalancing, len(s.balancing))
}

// checkGroup tests group i's voters (distinct, a majority of the factor
// up) and keeps its account of time under the factor.
func (s *simCluster) checkGroup(i int) {
	g := s.groups[i]
	for j, v := range g.voters {
		if slices.Contains(g.voters[j+1:], v) {
			s.violate("group %d has two voters on %s", s.plan[i].ID, v)
		}
	}
	up := s.liveVoters(i)
	if up < s.cfg.RF/2+1 {
		s.violate("group %d has %d of its voters %v up, below the quorum of its factor", s.plan[i].ID, up, g.voters)
	}
	switch under := up < s.cfg.RF; {
	case under && g.underSince < 0:
		g.underSince = s.now
	case !under && g.underSince >= 0:
		s.stats.UnderGroupSeconds += (s.now - g.underSince).Seconds()
		g.underSince = -1
	}
}

// passNow runs one pass of the meta leader, the sizes refreshed first
// when due; it reports whether the pass proposed.
func (s *simCluster) passNow() bool {
	if s.now-s.sizesAt >= s.cfg.SizeRefresh {
		s.refreshSizes()
	}
	acted := s.pass()
	s.idle = !acted
	return acted
}

// next moves the clock to the next pass that may matter, limit at most:
// the next tick after a pass that proposed; after one that did not, the
// tick of the next thing that may change its answer (wake).
func (s *simCluster) next(acted bool, limit time.Duration) {
	to := s.now + s.cfg.Tick
	if !acted {
		to = s.wake(max(limit, to))
	}
	s.advance(min(to, max(limit, s.now+s.cfg.Tick)))
}

// wake is the tick of the next thing that may change a pass's answer: a
// copy or a group's change ends, the sizes are refreshed, a dead node's
// timeout or a move's runs out; limit at the latest.
func (s *simCluster) wake(limit time.Duration) time.Duration {
	next := min(limit, s.sizesAt+s.cfg.SizeRefresh)
	per := s.shares()
	for _, c := range s.copies {
		if n := per[c.node]; n > 0 && s.copying(c) {
			next = min(next, s.now+time.Duration(c.remaining/(s.cfg.Rate/float64(n))*float64(time.Second)))
		}
	}
	for i, g := range s.groups {
		if g.doneAt >= 0 {
			next = min(next, g.doneAt)
		}
		if g.move != nil {
			if to := g.move.since + simMoveTimeoutFor(s.sizes[i], s.cfg.Rate); to > s.now {
				next = min(next, to)
			}
		}
	}
	for _, n := range s.nodes {
		if st := s.state[n]; !st.alive && st.diedAt+s.cfg.DeadNodeTimeout >= s.now {
			next = min(next, st.diedAt+s.cfg.DeadNodeTimeout+1)
		}
	}
	tick := s.cfg.Tick
	return max(s.now+tick, (next+tick-1)/tick*tick)
}

// settled reports whether the cluster is at rest: the last pass proposed
// nothing, no group is moving or has fewer than its factor of voters up,
// and no out node holds a replica.
func (s *simCluster) settled() bool {
	if !s.idle {
		return false
	}
	out, _ := s.out()
	for i, g := range s.groups {
		if g.move != nil || g.underSince >= 0 || slices.ContainsFunc(s.plan[i].Replicas, func(r string) bool { return slices.Contains(out, r) }) {
			return false
		}
	}
	return true
}

// runFor runs the cluster for d, whatever happens.
func (s *simCluster) runFor(d time.Duration) {
	for end := s.now + d; s.now < end; {
		s.next(s.passNow(), end)
	}
}

// index is the position of group id in the table.
func (s *simCluster) index(id uint64) int {
	i, ok := slices.BinarySearchFunc(s.plan, id, func(g Group, id uint64) int {
		switch {
		case g.ID < id:
			return -1
		case g.ID > id:
			return 1
		}
		return 0
	})
	if !ok {
		panic(fmt.Sprintf("simulation: no group %d", id))
	}
	return i
}

// sameSet reports whether a and b hold the same nodes (each holds a node
// once).
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
