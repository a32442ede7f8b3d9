package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/group"
)

// heartbeat answers Heartbeat (versions 0 to 4): it keeps a member's
// session, and tells it when to join again: REBALANCE_IN_PROGRESS during
// a join phase (it keeps its partitions, commits and joins),
// ILLEGAL_GENERATION when its generation ended without it or was fenced
// by an offset reset (it drops its partitions and positions and joins),
// UNKNOWN_MEMBER_ID when the group no longer knows it (also after the
// coordinator moved).
func (s *Server) heartbeat(ctx context.Context, rc *reqCtx, req *kmsg.HeartbeatRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	switch {
	case group.ValidateName("group", req.Group) != nil:
		resp.ErrorCode = errInvalidGroupID
	case !rc.mayGroup(req.Group):
		resp.ErrorCode = errGroupAuthorizationFailed
	case !s.groups.lead(ctx, req.Group, false):
		resp.ErrorCode = errNotCoordinator
	default:
		resp.ErrorCode = s.groups.heartbeat(req)
	}
	rc.note(resp.ErrorCode)
	return resp
}

func (c *coordinator) heartbeat(req *kmsg.HeartbeatRequest) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errNotCoordinator
	}
	g := c.groups[req.Group]
	m, code := c.checkMember(g, req.MemberID, req.InstanceID)
	if code != errNone {
		return code
	}
	if req.Generation != g.generation {
		m.basis = basisNone
		return errIllegalGeneration
	}
	c.touch(g, m)
	if c.fenceMoved(g) {
		m.basis = basisNone
		return errIllegalGeneration
	}
	if g.state == groupPreparingRebalance {
		return errRebalanceInProgress
	}
	return errNone
}
