package server

import (
	"context"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
)

// LeaveGroup removes a member; its partitions move to the others at once.
func (s *Server) LeaveGroup(ctx context.Context, req *connect.Request[logdv1.LeaveGroupRequest]) (*connect.Response[logdv1.LeaveGroupResponse], error) {
	if err := s.b.LeaveGroup(ctx, backend.GroupLeave{Group: req.Msg.Group, Member: req.Msg.MemberId}); err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&logdv1.LeaveGroupResponse{}), nil
}
