package server

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
)

// maxResetPartitions bounds the partitions of one reset.
const maxResetPartitions = 100_000

// ResetGroupOffsets plans an offset reset: for each selected partition the
// current committed offset, the new one (clamped to the log's bounds, and
// marked so) and the lag before and after. With execute it applies the
// plan as one Raft command: atomically, and fencing the group's members on
// those partitions (their generation is stale), so they restart at the new
// offsets and no commit of theirs can undo the reset.
func (s *Server) ResetGroupOffsets(ctx context.Context, req *connect.Request[logdv1.ResetGroupOffsetsRequest]) (*connect.Response[logdv1.ResetGroupOffsetsResponse], error) {
	m := req.Msg
	if err := group.ValidateName("group", m.Group); err != nil {
		return nil, toConnectError(err)
	}
	g, err := s.b.ConsumerGroup(m.Group)
	if err != nil {
		g = group.NewConsumerGroup(m.Group)
	}
	spec, explicit, err := resetSpec(m)
	if err != nil {
		return nil, err
	}
	targets, err := s.resetTargets(m, g, explicit)
	if err != nil {
		return nil, err
	}
	resp := &logdv1.ResetGroupOffsetsResponse{}
	var offsets []group.OffsetCommit
	for _, tp := range targets {
		o, err := s.b.Offsets(tp.Topic, tp.Partition)
		if err != nil {
			return nil, toConnectError(err)
		}
		b := group.PartitionBounds{Start: o.LogStart, End: o.End}
		ps := spec
		if explicit != nil {
			ps = group.ResetSpec{Strategy: group.ToOffset, Offset: explicit[tp]}
		}
		if ps.Strategy == group.ToTime {
			if b.AtTime, err = s.b.OffsetForTime(tp.Topic, tp.Partition, ps.Time.UnixMilli()); err != nil {
				return nil, toConnectError(err)
			}
		}
		current := int64(-1)
		if t, ok := g.Topics[tp.Topic]; ok && int(tp.Partition) < len(t.Partitions) {
			current = t.Partitions[tp.Partition].Committed
		}
		pr := group.PlanReset(tp, current, b, ps)
		resp.Plan = append(resp.Plan, &logdv1.ResetPlanEntry{
			Topic: tp.Topic, Partition: tp.Partition, CurrentOffset: pr.Current, NewOffset: pr.New,
			RequestedOffset: pr.Requested, Clamped: pr.Clamped, LagBefore: pr.LagBefore, LagAfter: pr.LagAfter,
		})
		offsets = append(offsets, group.OffsetCommit{TopicPartition: tp, Offset: pr.New})
	}
	if m.Execute {
		if err := s.b.ResetGroupOffsets(ctx, backend.GroupResetOffsets{Group: m.Group, Offsets: offsets}); err != nil {
			return nil, toConnectError(err)
		}
		resp.Executed = true
		if g, err := s.b.ConsumerGroup(m.Group); err == nil {
			resp.Generation = g.Generation
		}
		s.logger.InfoContext(ctx, "consumer group offsets reset", "group", m.Group, "partitions", len(offsets), "strategy", m.Strategy)
	}
	return connect.NewResponse(resp), nil
}

// resetSpec reads a reset request with group.ParseReset.
func resetSpec(m *logdv1.ResetGroupOffsetsRequest) (group.ResetSpec, map[group.TopicPartition]int64, error) {
	r := group.ResetRequest{Strategy: m.Strategy, Offset: m.Offset, Shift: m.ShiftBy, TimestampMs: m.TimestampMs, DurationMs: m.DurationMs}
	for _, o := range m.Offsets {
		if o == nil {
			return group.ResetSpec{}, nil, toConnectError(fmt.Errorf("%w: explicit reset: empty entry", group.ErrInvalidGroupRequest))
		}
		r.Explicit = append(r.Explicit, group.PartitionOffset{TopicPartition: group.TopicPartition{Topic: o.Topic, Partition: o.Partition}, Offset: o.Offset})
	}
	spec, explicit, err := group.ParseReset(r, time.Now())
	if err != nil {
		return group.ResetSpec{}, nil, toConnectError(err)
	}
	return spec, explicit, nil
}

// resetTargets lists the partitions a reset selects, in order.
func (s *Server) resetTargets(m *logdv1.ResetGroupOffsetsRequest, g *group.ConsumerGroup, explicit map[group.TopicPartition]int64) ([]group.TopicPartition, error) {
	var out []group.TopicPartition
	seen := map[group.TopicPartition]bool{}
	add := func(tp group.TopicPartition) {
		if !seen[tp] {
			seen[tp] = true
			out = append(out, tp)
		}
	}
	addTopic := func(name string, parts []int32) error {
		t, err := s.b.Topic(name)
		if err != nil {
			return toConnectError(err)
		}
		if len(parts) == 0 {
			for i := range t.Partitions {
				add(group.TopicPartition{Topic: name, Partition: i})
			}
			return nil
		}
		for _, p := range parts {
			if p < 0 || p >= t.Partitions {
				return toConnectError(fmt.Errorf("%w: %s has %d partitions, not %d", backend.ErrUnknownPartition, t.Name, t.Partitions, p))
			}
			add(group.TopicPartition{Topic: name, Partition: p})
		}
		return nil
	}
	switch {
	case explicit != nil:
		for _, o := range m.Offsets {
			if err := addTopic(o.Topic, []int32{o.Partition}); err != nil {
				return nil, err
			}
		}
	case m.AllTopics:
		names := g.KnownTopics()
		if len(names) == 0 {
			return nil, toConnectError(fmt.Errorf("%w: %q has no topics", group.ErrConsumerGroupNotFound, m.Group))
		}
		for _, n := range names {
			if _, err := s.b.Topic(n); err != nil {
				continue // deleted since: nothing to reset
			}
			if err := addTopic(n, nil); err != nil {
				return nil, err
			}
		}
	default:
		if len(m.Topics) == 0 {
			return nil, errInvalid("reset of group %q: name topics or all topics", m.Group)
		}
		for _, t := range m.Topics {
			if t == nil {
				return nil, errInvalid("empty topic selection")
			}
			if err := addTopic(t.Topic, t.Partitions); err != nil {
				return nil, err
			}
		}
	}
	if len(out) > maxResetPartitions {
		return nil, errInvalid("%d partitions in one reset; at most %d", len(out), maxResetPartitions)
	}
	return out, nil
}
