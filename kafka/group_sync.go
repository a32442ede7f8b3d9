package kafka

import (
	"bytes"
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/group"
)

// syncGroup answers SyncGroup (versions 0 to 5). The leader brings the
// plan of its generation, which makes the group stable; every member,
// the leader included, waits for it and gets its own part. In a stable
// group a member gets its part at once. A generation formed while the
// group's offsets were reset under a member's positions is answered
// ILLEGAL_GENERATION (coordinator.completeJoin), so its members drop
// their partitions and join again.
func (s *Server) syncGroup(ctx context.Context, rc *reqCtx, req *kmsg.SyncGroupRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	r := s.syncGroupResult(ctx, rc, req)
	resp.ErrorCode = r.code
	if r.code == errNone {
		resp.MemberAssignment = r.assignment
		if resp.MemberAssignment == nil {
			resp.MemberAssignment = []byte{}
		}
		pt, p := r.protocolType, r.protocol
		resp.ProtocolType, resp.Protocol = &pt, &p
	}
	rc.note(resp.ErrorCode)
	return resp
}

func (s *Server) syncGroupResult(ctx context.Context, rc *reqCtx, req *kmsg.SyncGroupRequest) syncResult {
	if group.ValidateName("group", req.Group) != nil {
		return syncResult{code: errInvalidGroupID}
	}
	if !rc.mayGroup(req.Group) {
		return syncResult{code: errGroupAuthorizationFailed}
	}
	if !s.groups.lead(ctx, req.Group, false) {
		return syncResult{code: errNotCoordinator}
	}
	ch, r := s.groups.sync(req)
	if ch == nil {
		return r
	}
	select {
	case r = <-ch:
		return r
	case <-ctx.Done():
		return syncResult{code: errNotCoordinator} // not written
	}
}

// sync records a member's SyncGroup and returns either the answer or the
// channel it comes on once the leader's plan is in.
func (c *coordinator) sync(req *kmsg.SyncGroupRequest) (chan syncResult, syncResult) {
	fail := func(code int16) (chan syncResult, syncResult) { return nil, syncResult{code: code} }
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fail(errNotCoordinator)
	}
	g := c.groups[req.Group]
	m, code := c.checkMember(g, req.MemberID, req.InstanceID)
	if code != errNone {
		return fail(code)
	}
	if req.Generation != g.generation {
		m.basis = basisNone
		return fail(errIllegalGeneration)
	}
	if req.ProtocolType != nil && *req.ProtocolType != g.protocolType || req.Protocol != nil && *req.Protocol != g.protocol {
		return fail(errInconsistentGroupProto)
	}
	c.touch(g, m)
	switch g.state {
	case groupPreparingRebalance:
		return fail(errRebalanceInProgress)
	case groupCompletingRebalance:
		if g.syncFenced || c.fenceMoved(g) {
			if g.state == groupCompletingRebalance {
				c.fenceGeneration(g)
			}
			m.basis = basisNone
			return fail(errIllegalGeneration)
		}
		ch := make(chan syncResult, 1)
		c.answerSync(m, syncResult{code: errRebalanceInProgress}) // a sync sent again
		m.sync = ch
		if m.id == g.leader {
			if !c.applyPlan(g, req.GroupAssignment) {
				m.sync = nil
				return fail(errUnknownServer)
			}
		}
		return ch, syncResult{}
	case groupStable:
		if c.fenceMoved(g) {
			m.basis = basisNone
			return fail(errIllegalGeneration)
		}
		m.basis = g.fence
		return nil, syncResult{assignment: m.assignment, protocolType: g.protocolType, protocol: g.protocol}
	}
	return fail(errUnknownMemberID)
}

// applyPlan stores the leader's plan (members it leaves out get an empty
// assignment), makes the group stable and answers the waiting members.
// It refuses a plan past the members' memory bound.
func (c *coordinator) applyPlan(g *kgroup, plan []kmsg.SyncGroupRequestGroupAssignment) bool {
	parts := make(map[string][]byte, len(plan))
	var add int64
	for _, a := range plan {
		if m, ok := g.members[a.MemberID]; ok {
			add += int64(len(a.MemberAssignment)) - int64(len(m.assignment))
			parts[a.MemberID] = a.MemberAssignment
		}
	}
	if c.bytes+add > c.opts.MaxGroupBytes {
		c.s.logger.Warn("kafka: group plan refused: members' memory bound", "group", g.id, "bytes", c.bytes+add, "bound", c.opts.MaxGroupBytes)
		return false
	}
	for _, m := range g.members {
		m.assignment = bytes.Clone(parts[m.id])
		c.account(m)
	}
	stopTimer(g.syncTimer)
	g.state = groupStable
	for _, m := range g.members {
		m.basis = g.fence
		c.answerSync(m, syncResult{assignment: m.assignment, protocolType: g.protocolType, protocol: g.protocol})
	}
	return true
}
