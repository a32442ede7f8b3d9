package server

import (
	"context"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// DeleteGroup deletes a consumer group and its offsets; a group with live
// members is refused (REASON_GROUP_NOT_EMPTY).
func (s *Server) DeleteGroup(ctx context.Context, req *connect.Request[logdv1.DeleteGroupRequest]) (*connect.Response[logdv1.DeleteGroupResponse], error) {
	if err := s.b.DeleteGroup(ctx, req.Msg.Group); err != nil {
		return nil, toConnectError(err)
	}
	s.groupMetrics.forget(req.Msg.Group)
	s.logger.InfoContext(ctx, "consumer group deleted", "group", req.Msg.Group)
	return connect.NewResponse(&logdv1.DeleteGroupResponse{}), nil
}
