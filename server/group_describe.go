package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/peer"
)

// kafkaMembersWait bounds a follower's call to the leader for a group's
// Kafka members (kafkaMembers).
const kafkaMembersWait = 2 * time.Second

// DescribeGroup shows a consumer group: state, generation, members with
// their partitions, and per partition the committed offset and the lag in
// records and in time (age of the oldest record not yet committed).
//
// The members are logd's own (replicated state) or, for a group Kafka
// clients consume in, the Kafka members the leader's group coordinator
// holds in its memory (kafkaMembers), with the group's state there; a
// group that has Kafka members and no commit yet is shown with its
// members only. Offsets and lag are always this node's; the group's state
// is its home's (docs/architecture.md, "Consumer groups"): this node's
// replica of it, or for a consistent read (ConsistentReadHeader) its
// home's leader.
func (s *Server) DescribeGroup(ctx context.Context, req *connect.Request[logdv1.DescribeGroupRequest]) (*connect.Response[logdv1.DescribeGroupResponse], error) {
	name := req.Msg.Group
	var g *group.ConsumerGroup
	var err error
	if req.Header().Get(ConsistentReadHeader) == "true" {
		g, err = s.b.ConsumerGroupLeader(ctx, name)
	} else {
		g, err = s.b.ConsumerGroup(name)
	}
	if err != nil && !errors.Is(err, group.ErrConsumerGroupNotFound) {
		return nil, toConnectError(err)
	}
	now := time.Now()
	live := 0
	if g != nil {
		_, live = g.Fence(now.UnixNano())
	}
	var ext *logdv1.DescribeGroupResponse
	if live == 0 {
		// One group is coordinated by one protocol at a time: only a
		// group without live logd members can have Kafka members.
		ext = s.kafkaMembers(ctx, req)
	}
	if g == nil && len(ext.GetMembers()) == 0 {
		return nil, toConnectError(err)
	}
	resp := &logdv1.DescribeGroupResponse{Group: name}
	if g != nil {
		resp = describeGroupMsg(g, func(topic string, partition int32, committed int64) (backend.Lag, bool) {
			return lagOf(s.b, topic, partition, committed, now)
		})
	}
	resp.Home = s.b.GroupHome(name)
	if len(ext.GetMembers()) > 0 {
		// The Kafka coordinator's generations, not the replicated
		// group's (which counts only logd members' rebalances and resets).
		resp.State, resp.Members, resp.Generation, resp.Rebalances = ext.State, ext.Members, ext.Generation, ext.Rebalances
		owner := map[group.TopicPartition]string{}
		for _, m := range ext.Members {
			for _, tp := range m.Partitions {
				owner[group.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}] = m.MemberId
			}
		}
		for _, p := range resp.Partitions {
			p.Owner = owner[group.TopicPartition{Topic: p.Topic, Partition: p.Partition}]
		}
	}
	return connect.NewResponse(resp), nil
}

// kafkaMembers returns a group's Kafka members and its state in the
// leader's Kafka group coordinator (nil without any): from the backend on
// the leader, else from the leader's DescribeGroup, called as the
// forwarder calls it (this node's peer client, the caller's principal),
// at most kafkaMembersWait and half the caller's time. Only members travel: the follower's own
// offsets stay what it answers with, as for any read. A call another
// node forwarded is not asked on again (the leader moved meanwhile), and
// a follower that cannot reach the leader answers without Kafka members
// (the failure is logged).
func (s *Server) kafkaMembers(ctx context.Context, req *connect.Request[logdv1.DescribeGroupRequest]) *logdv1.DescribeGroupResponse {
	if s.b.IsLeader() || s.b.GroupHome(req.Msg.Group) != 0 {
		// A group in a data group: the backend asks its home's leader,
		// where its coordinator runs.
		eg := s.b.ExternalGroup(req.Msg.Group)
		if len(eg.Members) == 0 {
			return nil
		}
		return externalGroupMsg(eg)
	}
	if req.Header().Get(ForwardedHeader) != "" {
		return nil
	}
	addr, _ := s.b.LeaderCallAddress()
	if addr == "" {
		return nil
	}
	// Half the caller's time at most: the answer, without the members
	// should the leader not answer, must still reach the caller.
	wait := kafkaMembersWait
	if deadline, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(deadline)/2)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	call := connect.NewRequest(&logdv1.DescribeGroupRequest{Group: req.Msg.Group})
	s.onBehalf(ctx, req.Header(), call.Header())
	resp, err := logdv1connect.NewLogServiceClient(s.leaderHTTP, s.peerHTTP.URL(addr)).DescribeGroup(ctx, call)
	if err != nil {
		if connect.CodeOf(err) != connect.CodeNotFound {
			s.logger.DebugContext(ctx, "describe group: the leader's Kafka members", "group", req.Msg.Group, "leader", addr, "err", err)
		}
		return nil
	}
	out := &logdv1.DescribeGroupResponse{State: resp.Msg.State, Generation: resp.Msg.Generation, Rebalances: resp.Msg.Rebalances}
	for _, m := range resp.Msg.Members {
		if m.Protocol == memberProtocolKafka {
			out.Members = append(out.Members, m)
		}
	}
	return out
}

// Member protocols (logdv1.ConsumerGroupMember.Protocol).
const (
	memberProtocolLogd  = "logd"
	memberProtocolKafka = "kafka"
)

// externalGroupMsg converts a group as the Kafka coordinator holds it.
func externalGroupMsg(eg backend.ExternalGroup) *logdv1.DescribeGroupResponse {
	out := &logdv1.DescribeGroupResponse{State: eg.State, Generation: eg.Generation, Rebalances: eg.Rebalances}
	for _, m := range eg.Members {
		cm := &logdv1.ConsumerGroupMember{
			MemberId: m.MemberID, Protocol: memberProtocolKafka, ClientId: m.ClientID, ClientHost: m.ClientHost,
			InstanceId: m.InstanceID, Topics: m.Topics,
		}
		for _, tp := range m.Partitions {
			cm.Partitions = append(cm.Partitions, &logdv1.GroupTopicPartition{Topic: tp.Topic, Partition: tp.Partition})
		}
		out.Members = append(out.Members, cm)
	}
	return out
}

// newLeaderClient returns the HTTP client of this node's own calls to the leader
// (kafkaMembers): over the peer client (peer TLS, routed dials).
func newLeaderClient(p peer.HTTP) *http.Client {
	return &http.Client{Transport: p.Transport(forwardDialTimeout, false)}
}
