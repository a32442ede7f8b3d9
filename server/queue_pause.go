package server

import (
	"context"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// PauseQueueGroup pauses or resumes a queue group (a replicated command):
// while paused, claims deliver nothing; leases given keep running.
func (s *Server) PauseQueueGroup(ctx context.Context, req *connect.Request[logdv1.PauseQueueGroupRequest]) (*connect.Response[logdv1.PauseQueueGroupResponse], error) {
	m := req.Msg
	if err := validateQueueNames(m.Topic, m.Group); err != nil {
		return nil, err
	}
	res, err := s.b.PauseQueueGroup(ctx, m.Topic, m.Group, m.Paused)
	if err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&logdv1.PauseQueueGroupResponse{Paused: res.Paused, Changed: res.Changed}), nil
}
