package server

import (
	"context"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/auth"
)

// ListRedrives lists the redrive jobs kept, oldest first: those on
// dead-letter topics the caller may read.
func (s *Server) ListRedrives(ctx context.Context, req *connect.Request[logdv1.ListRedrivesRequest]) (*connect.Response[logdv1.ListRedrivesResponse], error) {
	resp := &logdv1.ListRedrivesResponse{}
	for _, j := range s.b.RedriveJobs() {
		if req.Msg.DeadLetterTopic != "" && j.Spec.DeadLetterTopic != req.Msg.DeadLetterTopic {
			continue
		}
		if !s.may(ctx, topicPerm(auth.OpRead, j.Spec.DeadLetterTopic)) {
			continue
		}
		resp.Jobs = append(resp.Jobs, s.redriveJobProto(j))
	}
	return connect.NewResponse(resp), nil
}
