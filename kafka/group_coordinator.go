package kafka

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The group coordinator of Kafka's classic consumer group protocol
// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), as docs/kafka.md
// describes it. Members choose an assignor among the protocols they all
// support and their leader assigns the partitions; the coordinator keeps
// the members, their generation and the plan, and relays the plan's bytes
// without reading them.
//
// Where the state lives. Members, generations and plans are in the
// memory of the coordinator, the Raft leader: a group's members talk to
// it every few seconds, and the state is rebuilt by the members
// themselves when the leader changes (every group request elsewhere is
// NOT_COORDINATOR; they find the new leader, are unknown there and join
// again). Committed offsets are replicated: they are logd's consumer
// group offsets, written with replication's SetGroupOffsets, so
// `logctl group describe` shows them and `logctl group reset-offsets`
// moves them.
//
// Fencing by resets. An operator's reset bumps the replicated group's
// generation (package group). Each Kafka generation records that
// generation (its fence) when it forms, and every commit carries it: the
// state machine refuses a commit whose fence is not the group's
// generation, so nothing a member committed before a reset lands after
// it. The coordinator also looks at the fence on every heartbeat, sync
// and commit; once it moved, the members of the generation are told
// ILLEGAL_GENERATION, which makes every client drop its partitions
// (positions included) and join again, after which it reads the reset
// offsets. A member that was waiting in JoinGroup when the fence moved
// is told so at SyncGroup (syncFenced), since a cooperative member keeps
// the partitions it owned across a rebalance without reading their
// offsets again.

// groupState is a group's state in the classic protocol.
type groupState int8

const (
	groupEmpty groupState = iota
	groupPreparingRebalance
	groupCompletingRebalance
	groupStable
)

var groupStateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable"}

func (s groupState) String() string { return groupStateNames[s] }

// basisNone is a member's basis when it holds no positions: it is new,
// or was told its generation is illegal (clients drop everything then).
const basisNone int64 = -1

// coordinator holds the Kafka groups of this node while it leads.
type coordinator struct {
	s    *Server
	opts GroupOptions
	now  func() time.Time

	rebalances prometheus.Counter
	fenced     prometheus.Counter

	mu sync.Mutex
	// groups are the groups with members here, each formed while this
	// node led the group's home (kgroup.term). Guarded by mu, as
	// everything below.
	groups map[string]*kgroup
	// bytes is the memory of every member (kmember.bytes).
	bytes  int64
	closed bool
}

// kgroup is one Kafka group in the coordinator's memory. Guarded by
// coordinator.mu.
type kgroup struct {
	id string
	// term is the term of the group's home when the group formed here: a
	// request in another term drops the group (coordinator.leads).
	term       uint64
	state      groupState
	generation int32
	// rebalances counts the generations with members formed here, for
	// describe (GroupMembers).
	rebalances   int64
	protocolType string
	// protocol is the assignor chosen for the generation ("" when Empty).
	protocol string
	leader   string
	members  map[string]*kmember
	// static maps instance ids (group.instance.id) to member ids.
	static map[string]string
	// pending holds member ids handed out with MEMBER_ID_REQUIRED and not
	// joined yet, with the time they are forgotten.
	pending map[string]time.Time
	// fence is the replicated group's generation when this generation
	// formed; commits carry it.
	fence int64
	// syncFenced: a member of this generation kept positions from before
	// a reset, so its syncs are answered ILLEGAL_GENERATION.
	syncFenced bool
	// initialDelay: the group was empty when this join phase began, which
	// then lasts its whole delay.
	initialDelay bool
	joinDeadline time.Time
	joinTimer    *time.Timer
	syncTimer    *time.Timer
	// seq numbers joins, so the first member to join leads.
	seq uint64
}

// kmember is one member of a kgroup. Guarded by coordinator.mu.
type kmember struct {
	id         string
	instance   *string
	clientID   string
	clientHost string
	session    time.Duration
	rebalance  time.Duration
	protocols  []kmsg.JoinGroupRequestProtocol
	assignment []byte
	seq        uint64
	// basis is the fence of the generation the member's positions come
	// from, basisNone if it has none.
	basis    int64
	deadline time.Time
	timer    *time.Timer
	// join and sync are the waiting JoinGroup and SyncGroup, if any
	// (buffered: answering never blocks).
	join  chan joinResult
	sync  chan syncResult
	bytes int64
}

// joinResult answers a JoinGroup.
type joinResult struct {
	code       int16
	generation int32
	protocol   string
	leader     string
	memberID   string
	members    []kmsg.JoinGroupResponseMember
	skip       bool
}

// syncResult answers a SyncGroup.
type syncResult struct {
	code                   int16
	assignment             []byte
	protocolType, protocol string
}

func newCoordinator(s *Server, opts GroupOptions, reg prometheus.Registerer) *coordinator {
	c := &coordinator{s: s, opts: opts.withDefaults(), now: time.Now, groups: map[string]*kgroup{},
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "logd_kafka_group_rebalances_total", Help: "Generations formed by Kafka consumer groups with members.",
		}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "logd_kafka_group_fenced_generations_total", Help: "Kafka consumer group generations fenced because the group's offsets were reset (or logd-protocol members joined).",
		}),
	}
	if reg != nil {
		reg.MustRegister(c.rebalances, c.fenced,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "logd_kafka_groups", Help: "Kafka consumer groups with members on this node (the coordinator).",
			}, func() float64 { return float64(c.stats().groups) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "logd_kafka_group_members", Help: "Members of Kafka consumer groups on this node (the coordinator).",
			}, func() float64 { return float64(c.stats().members) }),
		)
	}
	return c
}

type coordinatorStats struct{ groups, members int }

func (c *coordinator) stats() coordinatorStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := coordinatorStats{groups: len(c.groups)}
	for _, g := range c.groups {
		st.members += len(g.members)
	}
	return st
}

// leads reports whether this node coordinates group id now: it leads the
// Raft group that holds the group's state, its home (the meta group, or a
// data group: docs/kafka.md, "Group coordinator"), ready to answer from
// it; with place, a group without a home is given one first. Otherwise,
// or when the home's term changed since the group formed here, the group
// in memory is dropped (its waiting members are answered
// NOT_COORDINATOR): members find the coordinator again and join. The
// term is the home's, which a group formed now records.
func (c *coordinator) leads(ctx context.Context, id string, place bool) (bool, uint64) {
	leads, term := false, uint64(0)
	if c.s.waitReady(ctx) {
		leads, term = c.s.b.LeadsGroup(ctx, id, place)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false, 0
	}
	if g := c.groups[id]; g != nil && (!leads || g.term != term) {
		c.dropGroupLocked(g)
	}
	return leads, term
}

// lead is leads without the term.
func (c *coordinator) lead(ctx context.Context, id string, place bool) bool {
	leads, _ := c.leads(ctx, id, place)
	return leads
}

// gateTerm is a coordinator's lead under its lock: a closed one does not
// lead, and one that does not lead, or leads in a term other than *formed
// (the term its groups formed in), drops its groups and takes the term.
func gateTerm(leads bool, term uint64, closed bool, formed *uint64, drop func()) bool {
	if closed {
		return false
	}
	if !leads || term != *formed {
		drop()
		*formed = term
	}
	return leads
}

// leaderTerm reports whether this node is the ready Raft leader, and its
// term when it is.
func (s *Server) leaderTerm(ctx context.Context) (bool, uint64) {
	if !s.waitReady(ctx) || !s.b.IsLeader() {
		return false, 0
	}
	return true, s.b.Status().Term
}

// dropLocked forgets every group.
func (c *coordinator) dropLocked() {
	for _, g := range c.groups {
		c.dropGroupLocked(g)
	}
}

// dropGroupLocked forgets a group, answering its waiting members
// NOT_COORDINATOR.
func (c *coordinator) dropGroupLocked(g *kgroup) {
	for _, m := range g.members {
		c.forget(g, m, errNotCoordinator)
	}
	for id := range g.pending {
		c.bytes -= pendingBytes(id)
	}
	stopTimer(g.joinTimer)
	stopTimer(g.syncTimer)
	delete(c.groups, g.id)
}

// close drops the groups and stops the timers; later calls are refused.
func (c *coordinator) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.dropLocked()
}

func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

// fenceOf returns the replicated group's generation.
func (c *coordinator) fenceOf(id string) int64 {
	gen, _, _ := c.s.b.GroupFence(id)
	return gen
}

// newMemberID makes a member id as Kafka does: the client's id (or a
// static member's instance id) and a random suffix.
func newMemberID(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// group returns a group, made Empty when create and it is missing, in the
// term of its home.
func (c *coordinator) group(id string, create bool, term uint64) *kgroup {
	g := c.groups[id]
	if g == nil && create {
		g = &kgroup{id: id, term: term, members: map[string]*kmember{}, static: map[string]string{}, pending: map[string]time.Time{}}
		c.groups[id] = g
	}
	return g
}

// gc forgets a group with nobody in it: its offsets are replicated, and
// its next member starts a new group.
func (c *coordinator) gc(g *kgroup) {
	if g.state == groupEmpty && len(g.members) == 0 && len(g.pending) == 0 && c.groups[g.id] == g {
		stopTimer(g.joinTimer)
		stopTimer(g.syncTimer)
		delete(c.groups, g.id)
	}
}

func memberBytes(m *kmember) int64 {
	n := 128 + len(m.id) + len(m.clientID) + len(m.clientHost) + len(m.assignment)
	if m.instance != nil {
		n += len(*m.instance)
	}
	for _, p := range m.protocols {
		n += len(p.Name) + len(p.Metadata)
	}
	return int64(n)
}

// account updates the memory of m after a change.
func (c *coordinator) account(m *kmember) {
	n := memberBytes(m)
	c.bytes += n - m.bytes
	m.bytes = n
}

// touch restarts a member's session.
func (c *coordinator) touch(g *kgroup, m *kmember) {
	m.deadline = c.now().Add(m.session)
	if m.timer == nil {
		m.timer = time.AfterFunc(m.session, func() { c.onSession(g, m) })
		return
	}
	m.timer.Reset(m.session)
}

// onSession expires a member whose session ran out. A member waiting in
// a JoinGroup of a join phase, or in a SyncGroup, is kept, as Kafka does:
// its session starts again (the phase has a deadline of its own).
func (c *coordinator) onSession(g *kgroup, m *kmember) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.groups[g.id] != g || g.members[m.id] != m {
		return
	}
	if m.join != nil && g.state == groupPreparingRebalance || m.sync != nil && g.state == groupCompletingRebalance {
		c.touch(g, m)
		return
	}
	if now := c.now(); now.Before(m.deadline) {
		m.timer.Reset(m.deadline.Sub(now))
		return
	}
	c.s.logger.Debug("kafka: group member's session expired", "group", g.id, "member", m.id)
	c.removeMember(g, m)
}

// addMember adds a new member and starts its session.
func (c *coordinator) addMember(g *kgroup, m *kmember) {
	g.seq++
	m.seq, m.basis = g.seq, basisNone
	g.members[m.id] = m
	if m.instance != nil {
		g.static[*m.instance] = m.id
	}
	c.account(m)
	c.touch(g, m)
}

// forget removes a member without moving the group, answering what it
// waits for with code.
func (c *coordinator) forget(g *kgroup, m *kmember, code int16) {
	delete(g.members, m.id)
	if m.instance != nil && g.static[*m.instance] == m.id {
		delete(g.static, *m.instance)
	}
	stopTimer(m.timer)
	c.bytes -= m.bytes
	c.answerJoin(m, joinResult{code: code, generation: -1, memberID: m.id})
	c.answerSync(m, syncResult{code: code})
	if g.leader == m.id {
		g.leader = ""
	}
}

// removeMember removes a member (it left, or its session ran out) and
// moves the group on: a rebalance, or the end of the join phase that
// waited for it.
func (c *coordinator) removeMember(g *kgroup, m *kmember) {
	c.forget(g, m, errUnknownMemberID)
	switch g.state {
	case groupStable, groupCompletingRebalance:
		c.prepareRebalance(g, errRebalanceInProgress)
	case groupPreparingRebalance:
		c.tryCompleteJoin(g)
	}
	c.gc(g)
}

func (c *coordinator) answerJoin(m *kmember, r joinResult) {
	if m.join != nil {
		m.join <- r
		m.join = nil
	}
}

func (c *coordinator) answerSync(m *kmember, r syncResult) {
	if m.sync != nil {
		if r.code == errIllegalGeneration || r.code == errUnknownMemberID {
			m.basis = basisNone
		}
		m.sync <- r
		m.sync = nil
	}
}

// prepareRebalance starts a join phase: members waiting in SyncGroup are
// answered syncCode (REBALANCE_IN_PROGRESS, or ILLEGAL_GENERATION when
// their generation was fenced), and the phase ends when every member
// joined again, or at the largest rebalance timeout of the members (a
// group that was empty waits its initial delay instead).
func (c *coordinator) prepareRebalance(g *kgroup, syncCode int16) {
	for _, m := range g.members {
		c.answerSync(m, syncResult{code: syncCode})
	}
	stopTimer(g.syncTimer)
	wasEmpty := g.state == groupEmpty
	g.state = groupPreparingRebalance
	g.syncFenced = false
	delay := time.Duration(0)
	for _, m := range g.members {
		delay = max(delay, m.rebalance)
	}
	g.initialDelay = false
	if wasEmpty && c.opts.InitialRebalanceDelay > 0 {
		delay = min(delay, c.opts.InitialRebalanceDelay)
		g.initialDelay = delay > 0
	}
	g.joinDeadline = c.now().Add(delay)
	if g.joinTimer == nil {
		g.joinTimer = time.AfterFunc(delay, func() { c.onJoinTimer(g) })
	} else {
		g.joinTimer.Reset(delay)
	}
	c.tryCompleteJoin(g)
}

// onJoinTimer ends a join phase at its deadline.
func (c *coordinator) onJoinTimer(g *kgroup) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.groups[g.id] != g || g.state != groupPreparingRebalance {
		return
	}
	if now := c.now(); now.Before(g.joinDeadline) {
		g.joinTimer.Reset(g.joinDeadline.Sub(now))
		return
	}
	c.completeJoin(g)
	c.gc(g)
}

// tryCompleteJoin ends the join phase once every member joined again and
// no member id handed out waits to join.
func (c *coordinator) tryCompleteJoin(g *kgroup) {
	if g.state != groupPreparingRebalance || g.initialDelay || len(g.pending) > 0 {
		return
	}
	for _, m := range g.members {
		if m.join == nil {
			return
		}
	}
	c.completeJoin(g)
}

// completeJoin forms the next generation from the members that joined
// (a static member that did not is kept, as Kafka does: it joins again
// when its heartbeat finds the generation moved), chooses the assignor
// and the leader, and answers every waiting JoinGroup; the leader gets
// the members and their subscriptions. The generation's fence is read
// here, before any member can read its offsets.
func (c *coordinator) completeJoin(g *kgroup) {
	for _, m := range g.members {
		if m.join == nil && m.instance == nil {
			c.forget(g, m, errUnknownMemberID)
		}
	}
	stopTimer(g.joinTimer)
	g.generation++
	fence := c.fenceOf(g.id)
	if len(g.members) == 0 {
		stopTimer(g.syncTimer)
		g.state, g.protocol, g.protocolType, g.leader, g.fence, g.syncFenced = groupEmpty, "", "", "", fence, false
		return
	}
	g.protocol = selectProtocol(g)
	if l, ok := g.members[g.leader]; !ok || l.join == nil {
		g.leader = ""
		for _, m := range g.members {
			if m.join != nil && (g.leader == "" || m.seq < g.members[g.leader].seq) {
				g.leader = m.id
			}
		}
	}
	g.state = groupCompletingRebalance
	g.syncFenced = false
	for _, m := range g.members {
		if m.basis != basisNone && m.basis != fence {
			g.syncFenced = true
		}
	}
	if g.syncFenced {
		c.fenced.Inc()
		c.s.logger.Info("kafka: group's offsets were reset during a rebalance; its members join again", "group", g.id, "generation", g.generation)
	}
	g.fence = fence
	c.rebalances.Inc()
	g.rebalances++
	timeout := time.Duration(0)
	for _, m := range g.members {
		timeout = max(timeout, m.rebalance)
	}
	gen := g.generation
	stopTimer(g.syncTimer)
	g.syncTimer = time.AfterFunc(timeout, func() { c.onSyncTimer(g, gen) })
	for _, m := range g.members {
		if m.join == nil {
			continue
		}
		r := c.joinResultFor(g, m)
		if m.id == g.leader {
			r.members = c.memberList(g)
		}
		c.answerJoin(m, r)
		c.touch(g, m)
	}
}

// onSyncTimer ends a generation whose members did not all sync within the
// rebalance timeout: those that did not are removed, and the others join
// again.
func (c *coordinator) onSyncTimer(g *kgroup, gen int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.groups[g.id] != g || g.state != groupCompletingRebalance || g.generation != gen {
		return
	}
	for _, m := range g.members {
		if m.sync == nil {
			c.s.logger.Debug("kafka: group member did not sync in time", "group", g.id, "member", m.id)
			c.forget(g, m, errUnknownMemberID)
		}
	}
	c.prepareRebalance(g, errRebalanceInProgress)
	c.gc(g)
}

// fenceGeneration ends a generation whose offsets were reset: its number
// is skipped, so every member of it is told ILLEGAL_GENERATION at its next
// heartbeat, sync or commit, drops its partitions and joins again.
func (c *coordinator) fenceGeneration(g *kgroup) {
	c.fenced.Inc()
	c.s.logger.Info("kafka: group's offsets were reset; its members join again", "group", g.id, "generation", g.generation)
	g.generation++
	c.prepareRebalance(g, errIllegalGeneration)
}

// fenceMoved reports whether the replicated group's generation moved
// since the group's generation formed; if so, and the group is not
// already between generations, the generation is fenced.
func (c *coordinator) fenceMoved(g *kgroup) bool {
	if c.fenceOf(g.id) == g.fence {
		return false
	}
	if g.state == groupStable || g.state == groupCompletingRebalance {
		c.fenceGeneration(g)
	}
	return true
}

// selectProtocol chooses the assignor of a generation: among the
// protocols every member supports, the one most members prefer (each
// member votes for the first it lists), ties broken by the leader's or
// first member's order.
func selectProtocol(g *kgroup) string {
	var ms []*kmember
	for _, m := range g.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *kmember) int { return int(a.seq) - int(b.seq) })
	var candidates []string
	for i, m := range ms {
		var names []string
		for _, p := range m.protocols {
			if i == 0 || slices.Contains(candidates, p.Name) {
				names = append(names, p.Name)
			}
		}
		candidates = names
	}
	votes := map[string]int{}
	for _, m := range ms {
		for _, p := range m.protocols {
			if slices.Contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, name := range candidates {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

// supportsProtocols reports whether a member of protocol type typ with
// protocols ps may join g: a group with members has one protocol type,
// and all its members must share a protocol.
func supportsProtocols(g *kgroup, typ string, ps []kmsg.JoinGroupRequestProtocol, self string) bool {
	others := 0
	for _, m := range g.members {
		if m.id != self {
			others++
		}
	}
	if others == 0 {
		return true
	}
	if typ != g.protocolType {
		return false
	}
	for _, p := range ps {
		shared := true
		for _, m := range g.members {
			if m.id == self {
				continue
			}
			if !slices.ContainsFunc(m.protocols, func(q kmsg.JoinGroupRequestProtocol) bool { return q.Name == p.Name }) {
				shared = false
				break
			}
		}
		if shared {
			return true
		}
	}
	return false
}

// sameProtocols reports whether two subscriptions are equal.
func sameProtocols(a, b []kmsg.JoinGroupRequestProtocol) bool {
	return slices.EqualFunc(a, b, func(x, y kmsg.JoinGroupRequestProtocol) bool {
		return x.Name == y.Name && bytes.Equal(x.Metadata, y.Metadata)
	})
}

// metadataFor returns a member's subscription for the group's protocol.
func metadataFor(m *kmember, protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// joinResultFor is the answer of the current generation to m.
func (c *coordinator) joinResultFor(g *kgroup, m *kmember) joinResult {
	return joinResult{generation: g.generation, protocol: g.protocol, leader: g.leader, memberID: m.id}
}

// memberList is what the leader learns: every member and its
// subscription for the chosen protocol, in join order.
func (c *coordinator) memberList(g *kgroup) []kmsg.JoinGroupResponseMember {
	var ms []*kmember
	for _, m := range g.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *kmember) int { return int(a.seq) - int(b.seq) })
	out := make([]kmsg.JoinGroupResponseMember, 0, len(ms))
	for _, m := range ms {
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID, jm.InstanceID, jm.ProtocolMetadata = m.id, m.instance, metadataFor(m, g.protocol)
		out = append(out, jm)
	}
	return out
}

// checkMember finds the member a SyncGroup, Heartbeat or OffsetCommit
// names: UNKNOWN_MEMBER_ID when the group or the member is unknown,
// FENCED_INSTANCE_ID when the instance id names another member.
func (c *coordinator) checkMember(g *kgroup, memberID string, instance *string) (*kmember, int16) {
	if g == nil || g.state == groupEmpty {
		return nil, errUnknownMemberID
	}
	if instance != nil {
		if id, ok := g.static[*instance]; ok && id != memberID {
			return nil, errFencedInstanceID
		}
	}
	m := g.members[memberID]
	if m == nil {
		return nil, errUnknownMemberID
	}
	if m.instance != nil && instance != nil && *m.instance != *instance {
		return nil, errFencedInstanceID
	}
	return m, errNone
}
