// Package groupapi converts consumer-group state to the server's API
// messages.
package groupapi

import (
	"time"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/group"
)

// Bounds returns a partition's log start and end offsets; false if the
// partition does not exist.
type Bounds func(topic string, partition int32) (start, end int64, ok bool)

// Assignment converts an assignment, adding each partition's start
// position from the committed offset or the member's reset policy: -1 if
// the policy gives none, the committed offset if the partition is unknown.
func Assignment(a group.Assignment, policy group.ResetPolicy, bounds Bounds) *logdv1.GroupAssignment {
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

// Lag is a group's position in one partition against its log: the log's
// bounds, and the lag in records and in seconds (the age of the oldest
// record not yet committed).
type Lag struct {
	Start, End int64
	Records    int64
	Seconds    float64
}

// Describe converts a group for DescribeGroup. lag gives the lag of a
// partition at a committed offset; false if the partition does not exist.
func Describe(g *group.ConsumerGroup, lag func(topic string, partition int32, committed int64) (Lag, bool)) *logdv1.DescribeGroupResponse {
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
