package server

import (
	"context"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
)

// JoinGroup adds a member to a consumer group (creating the group) for
// topics and returns its assignment.
func (s *Server) JoinGroup(ctx context.Context, req *connect.Request[logdv1.JoinGroupRequest]) (*connect.Response[logdv1.JoinGroupResponse], error) {
	m := req.Msg
	if m.SessionTimeoutMs < 0 {
		return nil, errInvalid("negative session timeout %d ms", m.SessionTimeoutMs)
	}
	a, err := s.b.JoinGroup(ctx, backend.GroupJoin{
		Group: m.Group, Member: m.MemberId, Topics: m.Topics,
		SessionTimeoutMs: int64(m.SessionTimeoutMs), Reset: group.ResetPolicy(m.ResetPolicy),
	})
	if err != nil {
		return nil, toConnectError(err)
	}
	policy, _ := group.ParseResetPolicy(m.ResetPolicy)
	return connect.NewResponse(&logdv1.JoinGroupResponse{Assignment: assignmentMsg(a, policy, s.bounds)}), nil
}
