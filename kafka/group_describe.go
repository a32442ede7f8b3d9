package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/group"
)

// describeGroups answers DescribeGroups (versions 0 to 5), on the
// coordinator: a Kafka group's state, protocol and members (with their
// subscriptions and assignments once stable), or a replicated group as
// ListGroups shows it; a group that does not exist is "Dead", as Kafka
// answers. A group the principal may not describe is
// GROUP_AUTHORIZATION_FAILED.
func (s *Server) describeGroups(ctx context.Context, rc *reqCtx, req *kmsg.DescribeGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	lead := s.groups.lead(ctx)
	var views map[string]groupView
	if lead {
		views = map[string]groupView{}
		for _, v := range s.groupViews(req.Groups) {
			views[v.id] = v
		}
	}
	for _, id := range req.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group = id
		v, ok := views[id]
		switch {
		case group.ValidateName("group", id) != nil:
			dg.ErrorCode = errInvalidGroupID
		case !rc.mayGroup(id):
			dg.ErrorCode = errGroupAuthorizationFailed
		case !lead:
			dg.ErrorCode = errNotCoordinator
		case !ok:
			dg.State = "Dead"
		default:
			dg.State, dg.ProtocolType, dg.Protocol, dg.Members = v.state, v.protocolType, v.protocol, v.members
		}
		if dg.Members == nil {
			dg.Members = []kmsg.DescribeGroupsResponseGroupMember{}
		}
		rc.note(dg.ErrorCode)
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}
