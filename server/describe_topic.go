package server

import (
	"context"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
)

// DescribeTopic returns a topic's settings and each partition's state on
// this node.
func (s *Server) DescribeTopic(ctx context.Context, req *connect.Request[logdv1.DescribeTopicRequest]) (*connect.Response[logdv1.DescribeTopicResponse], error) {
	t, err := s.node.FSM().Topic(req.Msg.Name)
	if err != nil {
		return nil, toConnectError(err)
	}
	resp := &logdv1.DescribeTopicResponse{Topic: topicInfo(t)}
	for _, p := range t.Partitions {
		l := p.Log()
		segs := l.Segments()
		pi := &logdv1.PartitionInfo{
			Partition:      p.Index,
			LogStartOffset: l.StartOffset(),
			EndOffset:      l.EndOffset(),
			Bytes:          l.Size(),
			Segments:       int32(len(segs)),
		}
		for _, sg := range segs {
			if sg.Compacted {
				pi.CompactedSegments++
			}
		}
		if r, ok := s.node.FSM().LastCleanerRun(t.Name, t.CreateIndex, p.Index); ok {
			pi.LastCleanerRun = &logdv1.CleanerRun{
				TimeMs: r.TimeNanos / 1e6, Action: r.Action, BytesDeleted: r.BytesDeleted, RecordsRemoved: r.RecordsRemoved,
			}
		}
		resp.Partitions = append(resp.Partitions, pi)
	}
	return connect.NewResponse(resp), nil
}
