package server

import (
	"context"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
)

// CreateTopic creates a topic through Raft, within the cluster's quota of
// topics and partitions (replication.Config.Quota), which the state
// machine checks as it applies the creation, so every node agrees.
func (s *Server) CreateTopic(ctx context.Context, req *connect.Request[logdv1.CreateTopicRequest]) (*connect.Response[logdv1.CreateTopicResponse], error) {
	m := req.Msg
	t, err := s.b.CreateTopic(ctx, backend.CreateTopic{Name: m.Name, Partitions: m.Partitions, Config: m.Config})
	if err != nil {
		s.quotaMetrics.refusal(err)
		return nil, toConnectError(err)
	}
	s.logger.InfoContext(ctx, "topic created", "topic", m.Name, "partitions", m.Partitions)
	return connect.NewResponse(&logdv1.CreateTopicResponse{Topic: topicInfo(t)}), nil
}
