package server

import (
	"time"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/replication"
)

// assignmentProto converts an assignment, adding each partition's start
// position from the committed offset or the member's reset policy.
func (s *Server) assignmentProto(a group.Assignment, policy group.ResetPolicy) *logdv1.GroupAssignment {
	out := &logdv1.GroupAssignment{Generation: a.Generation}
	for _, p := range a.Partitions {
		ap := &logdv1.AssignedPartition{Topic: p.Topic, Partition: p.Partition, SinceGeneration: p.Since, CommittedOffset: p.Committed, Position: p.Committed}
		if part, err := s.node.FSM().Partition(p.Topic, p.Partition); err == nil {
			l := part.Log()
			pos, ok := group.StartPosition(p.Committed, policy, l.StartOffset(), l.EndOffset())
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

// memberPolicy returns a member's reset policy from applied state
// (earliest if unknown).
func (s *Server) memberPolicy(groupName, member string) group.ResetPolicy {
	g, err := s.node.FSM().ConsumerGroup(groupName)
	if err != nil {
		return group.ResetEarliest
	}
	if m, ok := g.Members[member]; ok {
		return m.Reset
	}
	return group.ResetEarliest
}

// partitionLag is a group's position in one partition against its log.
type partitionLag struct {
	start, end int64
	records    int64
	seconds    float64
}

// lagOf computes the lag in records and in time: the age, at now, of the
// record at the committed offset (the oldest record the group has not
// committed), read from the log. Without a committed offset the oldest
// record is the first in the log.
func lagOf(p *replication.Partition, committed int64, now time.Time) partitionLag {
	l := p.Log()
	pl := partitionLag{start: l.StartOffset(), end: l.EndOffset()}
	pl.records = group.LagRecords(committed, pl.start, pl.end)
	if pl.records == 0 {
		return pl
	}
	from := max(committed, pl.start)
	data, err := l.Read(from, 1)
	if err != nil || len(data) == 0 {
		return pl
	}
	recs, err := batch.Records(data, from, 1)
	if err != nil || len(recs) == 0 {
		return pl
	}
	if age := now.Sub(time.UnixMilli(recs[0].Timestamp)); age > 0 {
		pl.seconds = age.Seconds()
	}
	return pl
}
