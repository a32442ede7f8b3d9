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
		resp.Partitions = append(resp.Partitions, &logdv1.PartitionInfo{
			Partition:      p.Index,
			LogStartOffset: l.StartOffset(),
			EndOffset:      l.EndOffset(),
			Bytes:          l.Size(),
			Segments:       int32(len(l.Segments())),
		})
	}
	return connect.NewResponse(resp), nil
}
