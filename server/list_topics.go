package server

import (
	"context"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
)

// ListTopics lists the topics this node has applied that the caller may
// describe.
func (s *Server) ListTopics(ctx context.Context, req *connect.Request[logdv1.ListTopicsRequest]) (*connect.Response[logdv1.ListTopicsResponse], error) {
	resp := &logdv1.ListTopicsResponse{}
	if req.Msg.Stats {
		for _, t := range s.b.TopicStates() {
			if s.may(ctx, topicPerm(auth.OpDescribe, t.Topic.Name)) {
				ti := topicInfo(t.Topic)
				ti.Stats = topicStats(t.Partitions)
				resp.Topics = append(resp.Topics, ti)
			}
		}
		return connect.NewResponse(resp), nil
	}
	for _, t := range s.b.Topics() {
		if s.may(ctx, topicPerm(auth.OpDescribe, t.Name)) {
			resp.Topics = append(resp.Topics, topicInfo(t))
		}
	}
	return connect.NewResponse(resp), nil
}

// topicStats sums a topic's partitions as this node holds them.
func topicStats(ps []backend.PartitionState) *logdv1.TopicStats {
	st := &logdv1.TopicStats{}
	for _, p := range ps {
		st.Records += p.EndOffset - p.LogStartOffset
		st.Bytes += p.Bytes
		st.Segments += p.Segments
		st.EndOffsets += p.EndOffset
	}
	return st
}
