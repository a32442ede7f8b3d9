package server

import (
	"context"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// DescribeGroup shows a consumer group: state, generation, members with
// their partitions, and per partition the committed offset and the lag in
// records and in time (age of the oldest record not yet committed).
func (s *Server) DescribeGroup(ctx context.Context, req *connect.Request[logdv1.DescribeGroupRequest]) (*connect.Response[logdv1.DescribeGroupResponse], error) {
	g, err := s.node.FSM().ConsumerGroup(req.Msg.Group)
	if err != nil {
		return nil, toConnectError(err)
	}
	resp := &logdv1.DescribeGroupResponse{
		Group: g.Name, State: string(g.State()), Generation: g.Generation, Rebalances: g.Rebalances, OffsetResets: g.OffsetResets,
	}
	for _, id := range g.MemberIDs() {
		m := g.Members[id]
		cm := &logdv1.ConsumerGroupMember{
			MemberId: id, Topics: m.Topics, LastSeenMs: time.Unix(0, m.LastSeen).UnixMilli(),
			SessionTimeoutMs: int32(time.Duration(m.SessionTimeout).Milliseconds()), ResetPolicy: string(m.Reset),
			JoinedMs: time.Unix(0, m.JoinedAt).UnixMilli(),
		}
		for _, tp := range g.Owned(id) {
			cm.Partitions = append(cm.Partitions, &logdv1.GroupTopicPartition{Topic: tp.Topic, Partition: tp.Partition})
		}
		resp.Members = append(resp.Members, cm)
	}
	now := time.Now()
	for _, name := range g.TopicNames() {
		for i, cp := range g.Topics[name].Partitions {
			pp := &logdv1.ConsumerGroupPartition{
				Topic: name, Partition: int32(i), CommittedOffset: cp.Committed, Owner: cp.Owner, PendingOwner: cp.Pending,
				SinceGeneration: cp.Since, SkippedRecords: cp.Skipped, AutoResets: cp.AutoResets,
			}
			if cp.CommittedAt != 0 {
				pp.CommittedMs = time.Unix(0, cp.CommittedAt).UnixMilli()
			}
			if part, err := s.node.FSM().Partition(name, int32(i)); err == nil {
				lag := lagOf(part, cp.Committed, now)
				pp.LogStartOffset, pp.EndOffset, pp.LagRecords, pp.LagSeconds = lag.start, lag.end, lag.records, lag.seconds
			}
			resp.Partitions = append(resp.Partitions, pp)
		}
	}
	return connect.NewResponse(resp), nil
}
