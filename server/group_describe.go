package server

import (
	"context"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/replication"
)

// DescribeGroup shows a consumer group: state, generation, members with
// their partitions, and per partition the committed offset and the lag in
// records and in time (age of the oldest record not yet committed).
func (s *Server) DescribeGroup(ctx context.Context, req *connect.Request[logdv1.DescribeGroupRequest]) (*connect.Response[logdv1.DescribeGroupResponse], error) {
	g, err := s.b.ConsumerGroup(req.Msg.Group)
	if err != nil {
		return nil, toConnectError(err)
	}
	now := time.Now()
	resp := describeGroupMsg(g, func(topic string, partition int32, committed int64) (replication.Lag, bool) {
		return lagOf(s.b, topic, partition, committed, now)
	})
	return connect.NewResponse(resp), nil
}
