package server

import (
	"context"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// MaxDescribeInFlight bounds the in-flight records one describe lists (by
// partition and offset), so an answer stays small.
const MaxDescribeInFlight = 10_000

// DescribeQueueGroup reports a queue group from this node's applied state,
// counting leases that expired by the node's clock as ready.
func (s *Server) DescribeQueueGroup(ctx context.Context, req *connect.Request[logdv1.DescribeQueueGroupRequest]) (*connect.Response[logdv1.DescribeQueueGroupResponse], error) {
	m := req.Msg
	if err := validateQueueNames(m.Topic, m.Group); err != nil {
		return nil, err
	}
	now := s.b.Now().UnixNano()
	info, err := s.b.DescribeQueueGroup(m.Topic, m.Group, now)
	if err != nil {
		return nil, toConnectError(err)
	}
	resp := &logdv1.DescribeQueueGroupResponse{Topic: info.Topic, Group: info.Group, Config: queueConfigProto(info.Config), CreatedMs: nsToMs(info.CreatedAt),
		Paused: info.Paused, AdmissionRefusals: s.queueHealth.refusedCount(info.Topic, info.Group),
		DeadLetterRecords: deadLetterRecords(s.b, info.Config.DeadLetterTopic),
		BacklogRecords:    info.Backlog.Records, BacklogBytes: info.Backlog.Bytes, BacklogBytesExact: info.ExactBytes,
		DrainPerSec: info.DrainPerSec, MaxBacklogAgeMs: info.MaxBacklogAgeMs}
	if info.OldestAppend > 0 && now > info.OldestAppend {
		resp.OldestUnfinishedAgeMs = (now - info.OldestAppend) / int64(time.Millisecond)
	}
	if m.InFlight {
		recs, _, err := s.b.QueueInFlight(m.Topic, m.Group, now, MaxDescribeInFlight)
		if err != nil {
			return nil, toConnectError(err)
		}
		for _, r := range recs {
			resp.InFlight = append(resp.InFlight, &logdv1.InFlightRecord{Partition: r.Partition, Offset: r.Offset, Worker: r.Worker,
				Delivery: r.Delivery, DeliveredMs: nsToMs(r.Delivered), LeaseUntilMs: nsToMs(r.LeaseUntil), Extensions: int32(min(r.Extends, 1<<31-1))})
		}
	}
	for _, p := range info.Partitions {
		ps := &logdv1.QueuePartitionState{
			Partition: p.Partition, DoneOffset: p.Start, NextOffset: p.Next, EndOffset: p.End,
			Ready: p.Ready, InFlight: p.InFlight, Delayed: p.Delayed, DeadPending: p.DeadPending,
			Acked: p.Acked, DeadLettered: p.DeadLettered, AtCap: p.AtCap,
			Nacked: p.Nacked, Expired: p.Expired,
		}
		if p.OldestReadyTimestamp > 0 && now > p.OldestReadyTimestamp {
			ps.OldestReadyAgeMs = (now - p.OldestReadyTimestamp) / int64(time.Millisecond)
		}
		if p.OldestInFlightSince > 0 && now > p.OldestInFlightSince {
			ps.OldestInFlightAgeMs = (now - p.OldestInFlightSince) / int64(time.Millisecond)
		}
		s.queueHealth.observe(info.Topic, info.Group, ps, time.Unix(0, now))
		resp.Partitions = append(resp.Partitions, ps)
	}
	return connect.NewResponse(resp), nil
}
