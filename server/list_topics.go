package server

import (
	"context"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/auth"
)

// ListTopics lists the topics this node has applied that the caller may
// describe.
func (s *Server) ListTopics(ctx context.Context, req *connect.Request[logdv1.ListTopicsRequest]) (*connect.Response[logdv1.ListTopicsResponse], error) {
	resp := &logdv1.ListTopicsResponse{}
	for _, t := range s.b.Topics() {
		if s.may(ctx, topicPerm(auth.OpDescribe, t.Name)) {
			resp.Topics = append(resp.Topics, topicInfo(t))
		}
	}
	return connect.NewResponse(resp), nil
}
