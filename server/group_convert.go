package server

import (
	"time"

	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/internal/groupapi"
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
func lagOf(b Backend, topic string, partition int32, committed int64, now time.Time) (groupapi.Lag, bool) {
	l, err := b.GroupLag(topic, partition, committed, now)
	if err != nil {
		return groupapi.Lag{}, false
	}
	return groupapi.Lag(l), true
}
