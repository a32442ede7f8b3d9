package server

import (
	"context"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
)

// DeleteTopic deletes a topic and its files through Raft.
func (s *Server) DeleteTopic(ctx context.Context, req *connect.Request[logdv1.DeleteTopicRequest]) (*connect.Response[logdv1.DeleteTopicResponse], error) {
	if err := s.b.DeleteTopic(ctx, req.Msg.Name); err != nil {
		return nil, toConnectError(err)
	}
	s.logger.InfoContext(ctx, "topic deleted", "topic", req.Msg.Name)
	return connect.NewResponse(&logdv1.DeleteTopicResponse{}), nil
}
