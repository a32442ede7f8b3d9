package server

import (
	"context"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// StopRedrive stops a running redrive job after the batch in hand (its
// position and counters then say what it did); an ended job is answered
// as it is.
func (s *Server) StopRedrive(ctx context.Context, req *connect.Request[logdv1.StopRedriveRequest]) (*connect.Response[logdv1.StopRedriveResponse], error) {
	if req.Msg.Id == "" {
		return nil, errInvalid("redrive id is empty")
	}
	j, err := s.b.StopRedrive(ctx, req.Msg.Id)
	if err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&logdv1.StopRedriveResponse{Job: s.redriveJobProto(j)}), nil
}
