package server

import (
	"time"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
)

// bounds returns a partition's log start and end offsets.
func (s *Server) bounds(topic string, partition int32) (start, end int64, ok bool) {
	o, err := s.b.Offsets(topic, partition)
	if err != nil {
		return 0, 0, false
	}
	return o.LogStart, o.End, true
}

// memberPolicy returns a member's reset policy from applied state
// (earliest if unknown).
func (s *Server) memberPolicy(groupName, member string) group.ResetPolicy {
	g, err := s.b.ConsumerGroup(groupName)
	if err != nil {
		return group.ResetEarliest
	}
	if m, ok := g.Members[member]; ok {
		return m.Reset
	}
	return group.ResetEarliest
}

// lagOf returns a group's lag in a partition at a committed offset, in
// records and in time (the age, at now, of the oldest record the group has
// not committed); false if the partition does not exist.
func lagOf(b backend.API, topic string, partition int32, committed int64, now time.Time) (backend.Lag, bool) {
	l, err := b.GroupLag(topic, partition, committed, now)
	if err != nil {
		return backend.Lag{}, false
	}
	return l, true
}

// assignmentMsg converts an assignment, adding each partition's start
// position from the committed offset or the member's reset policy: -1 if
// the policy gives none, the committed offset if the partition is unknown.
func assignmentMsg(a group.Assignment, policy group.ResetPolicy, bounds func(topic string, partition int32) (start, end int64, ok bool)) *logdv1.GroupAssignment {
	out := &logdv1.GroupAssignment{Generation: a.Generation}
	for _, p := range a.Partitions {
		ap := &logdv1.AssignedPartition{Topic: p.Topic, Partition: p.Partition, SinceGeneration: p.Since, CommittedOffset: p.Committed, Position: p.Committed}
		if start, end, ok := bounds(p.Topic, p.Partition); ok {
			pos, ok := group.StartPosition(p.Committed, policy, start, end)
			if !ok {
				pos = -1
			}
			ap.Position = pos
		}
		out.Partitions = append(out.Partitions, ap)
	}
	for _, tp := range a.Revoke {
		out.Revoke = append(out.Revoke, &logdv1.GroupTopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	return out
}

// describeGroupMsg converts a group for DescribeGroup. lag gives the lag
// of a partition at a committed offset; false if the partition does not
// exist.
func describeGroupMsg(g *group.ConsumerGroup, lag func(topic string, partition int32, committed int64) (backend.Lag, bool)) *logdv1.DescribeGroupResponse {
	resp := &logdv1.DescribeGroupResponse{
		Group: g.Name, State: string(g.State()), Generation: g.Generation, Rebalances: g.Rebalances, OffsetResets: g.OffsetResets,
	}
	for _, id := range g.MemberIDs() {
		m := g.Members[id]
		cm := &logdv1.ConsumerGroupMember{
			MemberId: id, Protocol: memberProtocolLogd, Topics: m.Topics, LastSeenMs: time.Unix(0, m.LastSeen).UnixMilli(),
			SessionTimeoutMs: int32(time.Duration(m.SessionTimeout).Milliseconds()), ResetPolicy: string(m.Reset),
			JoinedMs: time.Unix(0, m.JoinedAt).UnixMilli(),
		}
		for _, tp := range g.Owned(id) {
			cm.Partitions = append(cm.Partitions, &logdv1.GroupTopicPartition{Topic: tp.Topic, Partition: tp.Partition})
		}
		resp.Members = append(resp.Members, cm)
	}
	for _, name := range g.TopicNames() {
		for i, cp := range g.Topics[name].Partitions {
			pp := &logdv1.ConsumerGroupPartition{
				Topic: name, Partition: int32(i), CommittedOffset: cp.Committed, Owner: cp.Owner, PendingOwner: cp.Pending,
				SinceGeneration: cp.Since, SkippedRecords: cp.Skipped, AutoResets: cp.AutoResets,
			}
			if cp.CommittedAt != 0 {
				pp.CommittedMs = time.Unix(0, cp.CommittedAt).UnixMilli()
			}
			if l, ok := lag(name, int32(i), cp.Committed); ok {
				pp.LogStartOffset, pp.EndOffset, pp.LagRecords, pp.LagSeconds = l.Start, l.End, l.Records, l.Seconds
			}
			resp.Partitions = append(resp.Partitions, pp)
		}
	}
	return resp
}
