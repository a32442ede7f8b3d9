package server

import (
	"context"
	"slices"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/partition"
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
	resp := s.describeQueueMsg(info, now)
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
	return connect.NewResponse(resp), nil
}

// ListQueueGroups describes the queue groups of one topic, or of every
// topic, from this node's applied state: those the caller may describe,
// by topic and name, each as DescribeQueueGroup answers without its
// in-flight records.
func (s *Server) ListQueueGroups(ctx context.Context, req *connect.Request[logdv1.ListQueueGroupsRequest]) (*connect.Response[logdv1.ListQueueGroupsResponse], error) {
	var topics []string
	if t := req.Msg.Topic; t != "" {
		if err := partition.ValidateTopicName(t); err != nil {
			return nil, errInvalid("%v", err)
		}
		topics = []string{t}
	} else {
		for _, t := range s.b.Topics() {
			topics = append(topics, t.Name)
		}
		slices.Sort(topics)
	}
	now := s.b.Now().UnixNano()
	resp := &logdv1.ListQueueGroupsResponse{}
	for _, t := range topics {
		for _, name := range s.b.QueueGroups(t) {
			if !s.may(ctx, queuePerm(auth.OpDescribe, name)) {
				continue
			}
			info, err := s.b.DescribeQueueGroup(t, name, now)
			if err != nil {
				continue // deleted meanwhile
			}
			resp.Groups = append(resp.Groups, s.describeQueueMsg(info, now))
		}
	}
	return connect.NewResponse(resp), nil
}

// describeQueueMsg converts a queue group's state at now (Unix ns) for
// DescribeQueueGroup and ListQueueGroups, and samples its rates.
func (s *Server) describeQueueMsg(info backend.QueueGroupInfo, now int64) *logdv1.DescribeQueueGroupResponse {
	resp := &logdv1.DescribeQueueGroupResponse{Topic: info.Topic, Group: info.Group, Config: queueConfigProto(info.Config), CreatedMs: nsToMs(info.CreatedAt),
		Paused: info.Paused, AdmissionRefusals: s.queueHealth.refusedCount(info.Topic, info.Group),
		DeadLetterRecords: deadLetterRecords(s.b, info.Config.DeadLetterTopic),
		BacklogRecords:    info.Backlog.Records, BacklogBytes: info.Backlog.Bytes, BacklogBytesExact: info.ExactBytes,
		DrainPerSec: info.DrainPerSec, MaxBacklogAgeMs: info.MaxBacklogAgeMs}
	if info.OldestAppend > 0 && now > info.OldestAppend {
		resp.OldestUnfinishedAgeMs = (now - info.OldestAppend) / int64(time.Millisecond)
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
	return resp
}
