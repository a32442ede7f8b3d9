package server

import (
	"time"

	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/internal/groupapi"
	"github.com/logd-dev/logd/replication"
)

// bounds returns a partition's log start and end offsets.
func (s *Server) bounds(topic string, partition int32) (start, end int64, ok bool) {
	part, err := s.node.FSM().Partition(topic, partition)
	if err != nil {
		return 0, 0, false
	}
	l := part.Log()
	return l.StartOffset(), l.EndOffset(), true
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

// lagOf computes the lag in records and in time: the age, at now, of the
// record at the committed offset (the oldest record the group has not
// committed), read from the log. Without a committed offset the oldest
// record is the first in the log.
func lagOf(p *replication.Partition, committed int64, now time.Time) groupapi.Lag {
	l := p.Log()
	pl := groupapi.Lag{Start: l.StartOffset(), End: l.EndOffset()}
	pl.Records = group.LagRecords(committed, pl.Start, pl.End)
	if pl.Records == 0 {
		return pl
	}
	from := max(committed, pl.Start)
	data, err := l.Read(from, 1)
	if err != nil || len(data) == 0 {
		return pl
	}
	recs, err := batch.Records(data, from, 1)
	if err != nil || len(recs) == 0 {
		return pl
	}
	if age := now.Sub(time.UnixMilli(recs[0].Timestamp)); age > 0 {
		pl.Seconds = age.Seconds()
	}
	return pl
}
