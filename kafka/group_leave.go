package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/group"
)

// leaveGroup answers LeaveGroup (versions 0 to 5): each member named
// leaves at once, by member id, or by instance id for a static member
// (version 3 and later, which names several and answers each); the group
// rebalances without it.
func (s *Server) leaveGroup(ctx context.Context, rc *reqCtx, req *kmsg.LeaveGroupRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	members := req.Members
	if req.Version < 3 {
		members = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	switch {
	case group.ValidateName("group", req.Group) != nil:
		resp.ErrorCode = errInvalidGroupID
	case !rc.mayGroup(req.Group):
		resp.ErrorCode = errGroupAuthorizationFailed
	case !s.groups.lead(ctx, req.Group, false):
		resp.ErrorCode = errNotCoordinator
	default:
		codes := s.groups.leave(req.Group, members)
		if req.Version < 3 {
			resp.ErrorCode = codes[0]
			break
		}
		for i, lm := range members {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ErrorCode = lm.MemberID, lm.InstanceID, codes[i]
			rc.note(rm.ErrorCode)
			resp.Members = append(resp.Members, rm)
		}
	}
	rc.note(resp.ErrorCode)
	return resp
}

// leave removes members and returns a code for each.
func (c *coordinator) leave(id string, members []kmsg.LeaveGroupRequestMember) []int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	codes := make([]int16, len(members))
	g := c.groups[id]
	for i, lm := range members {
		switch {
		case c.closed:
			codes[i] = errNotCoordinator
		case g == nil:
			codes[i] = errUnknownMemberID
		case lm.InstanceID != nil:
			mid, ok := g.static[*lm.InstanceID]
			switch {
			case !ok:
				codes[i] = errUnknownMemberID
			case lm.MemberID != "" && lm.MemberID != mid:
				codes[i] = errFencedInstanceID
			default:
				c.s.logger.Debug("kafka: static group member left", "group", id, "member", mid)
				c.removeMember(g, g.members[mid])
			}
		default:
			if _, ok := g.pending[lm.MemberID]; ok {
				c.forgetPending(g, lm.MemberID)
				c.tryCompleteJoin(g)
				c.gc(g)
				continue
			}
			m := g.members[lm.MemberID]
			if m == nil {
				codes[i] = errUnknownMemberID
				continue
			}
			c.s.logger.Debug("kafka: group member left", "group", id, "member", m.id)
			c.removeMember(g, m)
		}
	}
	return codes
}
