package server

import (
	"context"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
)

// DescribeTopic returns a topic's settings and each partition's state on
// this node.
func (s *Server) DescribeTopic(ctx context.Context, req *connect.Request[logdv1.DescribeTopicRequest]) (*connect.Response[logdv1.DescribeTopicResponse], error) {
	t, err := s.b.DescribeTopic(req.Msg.Name)
	if err != nil {
		return nil, toConnectError(err)
	}
	resp := &logdv1.DescribeTopicResponse{Topic: topicInfo(t.Topic)}
	for _, p := range t.Partitions {
		pi := &logdv1.PartitionInfo{
			Partition:         p.Partition,
			LogStartOffset:    p.LogStartOffset,
			EndOffset:         p.EndOffset,
			Bytes:             p.Bytes,
			Segments:          p.Segments,
			CompactedSegments: p.CompactedSegments,
			DataGroup:         p.Group,
			Leader:            p.Leader,
		}
		if r := p.LastCleanerRun; r != nil {
			pi.LastCleanerRun = &logdv1.CleanerRun{
				TimeMs: r.TimeNanos / 1e6, Action: r.Action, BytesDeleted: r.BytesDeleted, RecordsRemoved: r.RecordsRemoved,
			}
		}
		resp.Partitions = append(resp.Partitions, pi)
	}
	return connect.NewResponse(resp), nil
}
