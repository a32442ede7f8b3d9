package kafka

import (
	"bytes"
	"context"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/group"
)

// joinGroup answers JoinGroup (versions 0 to 9): the member joins, and
// the answer waits for the end of the join phase, with the generation,
// the chosen assignor and the leader (who also gets every member's
// subscription). A member without an id gets one first with
// MEMBER_ID_REQUIRED (version 4 and later, KIP-394), unless it is static
// (an instance id, KIP-345): a static member that comes back replaces its
// previous incarnation, and in a stable group gets its assignment back
// without a rebalance. A group whose members of logd's own protocol are
// live is refused with INCONSISTENT_GROUP_PROTOCOL: one group is
// coordinated by one protocol at a time.
func (s *Server) joinGroup(ctx context.Context, rc *reqCtx, req *kmsg.JoinGroupRequest, clientID, clientHost string) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	r := s.joinGroupResult(ctx, rc, req, clientID, clientHost)
	resp.ErrorCode, resp.Generation, resp.MemberID = r.code, r.generation, r.memberID
	if r.code == errNone {
		pt, p := req.ProtocolType, r.protocol
		resp.ProtocolType, resp.Protocol, resp.LeaderID = &pt, &p, r.leader
		resp.Members, resp.SkipAssignment = r.members, r.skip
	}
	rc.note(resp.ErrorCode)
	return resp
}

func (s *Server) joinGroupResult(ctx context.Context, rc *reqCtx, req *kmsg.JoinGroupRequest, clientID, clientHost string) joinResult {
	fail := func(code int16) joinResult { return joinResult{code: code, generation: -1, memberID: req.MemberID} }
	if group.ValidateName("group", req.Group) != nil {
		return fail(errInvalidGroupID)
	}
	if !rc.mayGroup(req.Group) {
		return fail(errGroupAuthorizationFailed)
	}
	leads, term := s.groups.leads(ctx, req.Group, true)
	if !leads {
		return fail(errNotCoordinator)
	}
	o := s.groups.opts
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	if session < o.MinSessionTimeout || session > o.MaxSessionTimeout {
		return fail(errInvalidSessionTimeout)
	}
	rebalance := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 || rebalance <= 0 {
		rebalance = session
	}
	if req.ProtocolType == "" || len(req.Protocols) == 0 {
		return fail(errInconsistentGroupProto)
	}
	if req.InstanceID != nil && group.ValidateName("instance", *req.InstanceID) != nil {
		return fail(errInvalidRequest)
	}
	ch, r := s.groups.join(joinArgs{req: req, clientID: clientID, clientHost: clientHost, session: session, rebalance: rebalance, term: term})
	if ch == nil {
		return r
	}
	select {
	case r = <-ch:
		return r
	case <-ctx.Done():
		return fail(errNotCoordinator) // not written: the connection or the server is closing
	}
}

// joinArgs is a JoinGroup as the coordinator takes it.
type joinArgs struct {
	req                  *kmsg.JoinGroupRequest
	clientID, clientHost string
	session, rebalance   time.Duration
	// term is the term of the group's home, in which a group formed now
	// forms.
	term uint64
}

// join adds or updates the member and returns either the answer or the
// channel the answer comes on at the end of the join phase.
func (c *coordinator) join(a joinArgs) (chan joinResult, joinResult) {
	req := a.req
	fail := func(code int16, memberID string) (chan joinResult, joinResult) {
		return nil, joinResult{code: code, generation: -1, memberID: memberID}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fail(errNotCoordinator, req.MemberID)
	}
	if _, live, _ := c.s.b.GroupFence(req.Group); live > 0 {
		c.s.logger.Info("kafka: JoinGroup refused: the group has live members of logd's own protocol", "group", req.Group, "client_id", a.clientID)
		return fail(errInconsistentGroupProto, req.MemberID)
	}
	g := c.group(req.Group, req.MemberID == "", a.term)
	if g == nil {
		return fail(errUnknownMemberID, req.MemberID)
	}
	defer c.gc(g)
	if !supportsProtocols(g, req.ProtocolType, req.Protocols, req.MemberID) {
		return fail(errInconsistentGroupProto, req.MemberID)
	}
	ch := make(chan joinResult, 1)
	if req.MemberID == "" {
		if len(g.members)+len(g.pending) >= c.opts.MaxGroupMembers {
			return fail(errGroupMaxSizeReached, "")
		}
		if req.InstanceID != nil {
			if old, ok := g.static[*req.InstanceID]; ok {
				return c.rejoinStatic(g, g.members[old], a, ch)
			}
			m := &kmember{id: newMemberID(*req.InstanceID), instance: strPtr(*req.InstanceID)}
			if !c.update(g, m, a) {
				return fail(errGroupMaxSizeReached, "")
			}
			c.addMember(g, m)
			m.join = ch
			c.joinOrPrepare(g)
			return ch, joinResult{}
		}
		id := newMemberID(a.clientID)
		if req.Version >= 4 {
			// KIP-394: the member asks again with this id; until then
			// (at most its session) it counts as pending.
			if c.bytes+pendingBytes(id) > c.opts.MaxGroupBytes {
				return fail(errGroupMaxSizeReached, "")
			}
			c.bytes += pendingBytes(id)
			g.pending[id] = c.now().Add(a.session)
			time.AfterFunc(a.session, func() { c.onPending(g, id) })
			return fail(errMemberIDRequired, id)
		}
		m := &kmember{id: id}
		if !c.update(g, m, a) {
			return fail(errGroupMaxSizeReached, "")
		}
		c.addMember(g, m)
		m.join = ch
		c.joinOrPrepare(g)
		return ch, joinResult{}
	}
	if _, ok := g.pending[req.MemberID]; ok && req.InstanceID == nil {
		m := &kmember{id: req.MemberID}
		if !c.update(g, m, a) {
			return fail(errGroupMaxSizeReached, req.MemberID)
		}
		c.forgetPending(g, req.MemberID)
		c.addMember(g, m)
		m.join = ch
		c.joinOrPrepare(g)
		return ch, joinResult{}
	}
	m, code := c.checkMember(g, req.MemberID, req.InstanceID)
	if code != errNone {
		return fail(code, req.MemberID)
	}
	old := m.protocols
	if !c.update(g, m, a) {
		return fail(errGroupMaxSizeReached, req.MemberID)
	}
	// A JoinGroup sent again while one waits (the client gave up on the
	// first): the first is answered, the second waits.
	c.answerJoin(m, joinResult{code: errRebalanceInProgress, generation: -1, memberID: m.id})
	c.touch(g, m)
	if g.state == groupStable || g.state == groupCompletingRebalance {
		c.fenceMoved(g)
	}
	switch g.state {
	case groupCompletingRebalance:
		if sameProtocols(old, m.protocols) {
			// It missed the answer of this generation: the same again.
			r := c.joinResultFor(g, m)
			if m.id == g.leader {
				r.members = c.memberList(g)
			}
			return nil, r
		}
		m.join = ch
		c.prepareRebalance(g, errRebalanceInProgress)
	case groupStable:
		if m.id != g.leader && sameProtocols(old, m.protocols) {
			return nil, c.joinResultFor(g, m)
		}
		m.join = ch
		c.prepareRebalance(g, errRebalanceInProgress)
	default:
		m.join = ch
		c.tryCompleteJoin(g)
	}
	return ch, joinResult{}
}

// rejoinStatic replaces a static member's previous incarnation (a process
// that restarted with the same instance id) by a new member id. In a
// stable group whose subscription it keeps, it gets the current
// generation at once and its assignment at SyncGroup; a leader is told to
// skip the assignment (version 9, KIP-814), or, before version 9, is
// named by its previous id, as Kafka does.
func (c *coordinator) rejoinStatic(g *kgroup, m *kmember, a joinArgs, ch chan joinResult) (chan joinResult, joinResult) {
	c.answerJoin(m, joinResult{code: errFencedInstanceID, generation: -1, memberID: m.id})
	c.answerSync(m, syncResult{code: errFencedInstanceID})
	oldID, old := m.id, m.protocols
	if !c.update(g, m, a) {
		return nil, joinResult{code: errGroupMaxSizeReached, generation: -1}
	}
	delete(g.members, oldID)
	m.id = newMemberID(*m.instance)
	g.members[m.id] = m
	g.static[*m.instance] = m.id
	wasLeader := g.leader == oldID
	if wasLeader {
		g.leader = m.id
	}
	m.basis = basisNone
	c.touch(g, m)
	switch g.state {
	case groupStable:
		if sameProtocols(old, m.protocols) {
			r := c.joinResultFor(g, m)
			if wasLeader {
				if a.req.Version >= 9 {
					r.members, r.skip = c.memberList(g), true
				} else {
					r.leader = oldID
				}
			}
			return nil, r
		}
		m.join = ch
		c.prepareRebalance(g, errRebalanceInProgress)
	case groupCompletingRebalance:
		m.join = ch
		c.prepareRebalance(g, errRebalanceInProgress)
	default:
		m.join = ch
		c.tryCompleteJoin(g)
	}
	return ch, joinResult{}
}

// update copies a JoinGroup's settings into m (the request's buffer is not
// kept), unless the members' memory would pass its bound.
func (c *coordinator) update(g *kgroup, m *kmember, a joinArgs) bool {
	ps := make([]kmsg.JoinGroupRequestProtocol, len(a.req.Protocols))
	for i, p := range a.req.Protocols {
		ps[i] = kmsg.JoinGroupRequestProtocol{Name: strings.Clone(p.Name), Metadata: bytes.Clone(p.Metadata)}
	}
	next := *m
	next.protocols, next.clientID, next.clientHost = ps, strings.Clone(a.clientID), a.clientHost
	if c.bytes-m.bytes+memberBytes(&next) > c.opts.MaxGroupBytes {
		return false
	}
	m.protocols, m.clientID, m.clientHost = next.protocols, next.clientID, next.clientHost
	m.session, m.rebalance = a.session, a.rebalance
	if _, ok := g.members[m.id]; ok {
		c.account(m)
	}
	if len(g.members) == 0 || len(g.members) == 1 && g.members[m.id] == m {
		g.protocolType = strings.Clone(a.req.ProtocolType)
	}
	return true
}

// joinOrPrepare moves the group on after a member joined: a join phase
// starts, or the one under way may end.
func (c *coordinator) joinOrPrepare(g *kgroup) {
	if g.state == groupPreparingRebalance {
		c.tryCompleteJoin(g)
		return
	}
	c.prepareRebalance(g, errRebalanceInProgress)
}

// onPending forgets a member id handed out with MEMBER_ID_REQUIRED that
// did not join within its session.
func (c *coordinator) onPending(g *kgroup, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.groups[g.id] != g {
		return
	}
	if dl, ok := g.pending[id]; ok && !c.now().Before(dl) {
		c.forgetPending(g, id)
		c.tryCompleteJoin(g)
		c.gc(g)
	}
}

// forgetPending forgets a member id handed out with MEMBER_ID_REQUIRED.
func (c *coordinator) forgetPending(g *kgroup, id string) {
	if _, ok := g.pending[id]; ok {
		delete(g.pending, id)
		c.bytes -= pendingBytes(id)
	}
}

// pendingBytes is the memory a member id handed out holds.
func pendingBytes(id string) int64 { return int64(64 + len(id)) }

func strPtr(s string) *string { return &s }

// remoteHost is the client's address without its port, as DescribeGroups
// shows a member's host.
func (c *conn) remoteHost() string {
	addr := c.nc.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}
