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
	for _, id := range req.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group = id
		switch {
		case group.ValidateName("group", id) != nil:
			dg.ErrorCode = errInvalidGroupID
		case !rc.mayGroup(id):
			dg.ErrorCode = errGroupAuthorizationFailed
		case !s.groups.lead(ctx, id, false):
			// Each group's coordinator leads its home.
			dg.ErrorCode = errNotCoordinator
		default:
			dg.State = "Dead"
			if vs := s.groupViews(ctx, []string{id}); len(vs) == 1 {
				v := vs[0]
				dg.State, dg.ProtocolType, dg.Protocol, dg.Members = v.state, v.protocolType, v.protocol, v.members
			}
		}
		if dg.Members == nil {
			dg.Members = []kmsg.DescribeGroupsResponseGroupMember{}
		}
		rc.note(dg.ErrorCode)
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}
