package server

import (
	"context"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
)

// AlterTopic changes a topic's settings through Raft and returns its
// effective settings. Unknown keys, invalid values and a key both set and
// deleted are INVALID_ARGUMENT; a missing topic is UNKNOWN_TOPIC. Either
// way nothing changes.
func (s *Server) AlterTopic(ctx context.Context, req *connect.Request[logdv1.AlterTopicRequest]) (*connect.Response[logdv1.AlterTopicResponse], error) {
	m := req.Msg
	if m.Name == "" {
		return nil, errInvalid("topic name is required")
	}
	t, err := s.b.AlterTopic(ctx, backend.AlterTopic{Name: m.Name, Config: m.Config, Delete: m.DeleteConfig})
	if err != nil {
		return nil, toConnectError(err)
	}
	s.logger.InfoContext(ctx, "topic altered", "topic", m.Name, "set", m.Config, "deleted", m.DeleteConfig)
	return connect.NewResponse(&logdv1.AlterTopicResponse{Topic: topicInfo(t)}), nil
}
