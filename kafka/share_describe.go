package kafka

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/group"
)

// keyShareGroupDescribe is ShareGroupDescribe's key.
const keyShareGroupDescribe int16 = 77

// shareGroupDescribe answers ShareGroupDescribe (version 1): the share
// groups this node coordinates, their members with their subscriptions
// and assignments (every partition of their topics). A group with no
// member here but with queue groups of its name is Empty; a name with
// neither is GROUP_ID_NOT_FOUND.
func (s *Server) shareGroupDescribe(ctx context.Context, rc *reqCtx, req *kmsg.ShareGroupDescribeRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	lead := s.share.lead(ctx)
	for _, id := range req.GroupIDs {
		g := kmsg.NewShareGroupDescribeResponseGroup()
		g.GroupID = id
		switch {
		case group.ValidateName("group", id) != nil:
			g.ErrorCode = errInvalidGroupID
		case !rc.mayGroup(id):
			g.ErrorCode = errGroupAuthorizationFailed
		case !lead:
			g.ErrorCode = errNotCoordinator
		default:
			if !s.share.describe(id, &g) && !s.hasQueueGroups(id) {
				g.ErrorCode = errGroupIDNotFound
			}
		}
		rc.note(g.ErrorCode)
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}

// hasQueueGroups reports whether a queue group of name exists on a topic.
func (s *Server) hasQueueGroups(name string) bool {
	for _, t := range s.b.Topics() {
		if slices.Contains(s.b.QueueGroups(t.Name), name) {
			return true
		}
	}
	return false
}

// describe fills in a group's state and members; false when the
// coordinator does not know the group.
func (c *shareCoordinator) describe(id string, out *kmsg.ShareGroupDescribeResponseGroup) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out.GroupState, out.Assignor = "Empty", "simple"
	g := c.groups[id]
	if g == nil {
		return false
	}
	out.GroupEpoch, out.AssignmentEpoch = g.epoch, g.epoch
	if len(g.members) > 0 {
		out.GroupState = "Stable"
	}
	for _, mid := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[mid]
		dm := kmsg.NewShareGroupDescribeResponseGroupMember()
		dm.MemberID, dm.MemberEpoch, dm.ClientID, dm.ClientHost = m.id, m.epoch, m.clientID, "/"+m.clientHost
		dm.SubscribedTopicNames = slices.Clone(m.topics)
		for _, t := range m.topics {
			info, err := c.s.b.Topic(t)
			if err != nil {
				continue
			}
			tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
			tp.TopicID, tp.Topic = topicID(info), t
			for p := int32(0); p < info.Partitions; p++ {
				tp.Partitions = append(tp.Partitions, p)
			}
			dm.Assignment.TopicPartitions = append(dm.Assignment.TopicPartitions, tp)
		}
		out.Members = append(out.Members, dm)
	}
	return true
}

// listed is the share groups ListGroups shows: those this node
// coordinates, Stable with members and Empty without.
func (c *shareCoordinator) listed() []kmsg.ListGroupsResponseGroup {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]kmsg.ListGroupsResponseGroup, 0, len(c.groups))
	for _, id := range slices.Sorted(maps.Keys(c.groups)) {
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupType, lg.GroupState = id, "share", "share", "Empty"
		if len(c.groups[id].members) > 0 {
			lg.GroupState = "Stable"
		}
		out = append(out, lg)
	}
	return out
}
