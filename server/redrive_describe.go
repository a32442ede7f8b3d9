package server

import (
	"context"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// DescribeRedrive returns a redrive job with its progress, as applied on
// this node (the job's counters and position advance together, one entry
// per batch).
func (s *Server) DescribeRedrive(_ context.Context, req *connect.Request[logdv1.DescribeRedriveRequest]) (*connect.Response[logdv1.DescribeRedriveResponse], error) {
	if req.Msg.Id == "" {
		return nil, errInvalid("redrive id is empty")
	}
	j, err := s.b.RedriveJob(req.Msg.Id)
	if err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&logdv1.DescribeRedriveResponse{Job: s.redriveJobProto(j)}), nil
}
