package server

import (
	"context"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
)

// CreatePartitions grows a topic's partition count through Raft (one
// command, applied at one index on every node). A smaller count, or one
// above the per-topic limit, is INVALID_ARGUMENT; past the cluster's
// partition quota (the partitions added count, for the cluster and for the
// topic's creator), RESOURCE_EXHAUSTED; a missing topic, UNKNOWN_TOPIC;
// a cluster with a node whose build cannot apply it, FAILED_PRECONDITION.
// Each changes nothing. With validate_only every check runs and nothing
// is proposed.
func (s *Server) CreatePartitions(ctx context.Context, req *connect.Request[logdv1.CreatePartitionsRequest]) (*connect.Response[logdv1.CreatePartitionsResponse], error) {
	m := req.Msg
	if m.Name == "" {
		return nil, errInvalid("topic name is required")
	}
	before, err := s.b.Topic(m.Name)
	if err != nil {
		return nil, toConnectError(err)
	}
	c := backend.CreatePartitions{Name: m.Name, Count: m.Count}
	if m.ValidateOnly {
		if err := s.b.ValidateCreatePartitions(c); err != nil {
			return nil, toConnectError(err)
		}
		return connect.NewResponse(&logdv1.CreatePartitionsResponse{Topic: topicInfo(before), PreviousCount: before.Partitions}), nil
	}
	t, err := s.b.CreatePartitions(ctx, c)
	if err != nil {
		return nil, toConnectError(err)
	}
	if t.Partitions != before.Partitions {
		s.logger.InfoContext(ctx, "topic partitions added", "topic", m.Name, "from", before.Partitions, "to", t.Partitions)
	}
	return connect.NewResponse(&logdv1.CreatePartitionsResponse{Topic: topicInfo(t), PreviousCount: before.Partitions}), nil
}
