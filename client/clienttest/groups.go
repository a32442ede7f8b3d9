package clienttest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/internal/groupapi"
)

// Consumer groups of the fake. The membership, assignment, fencing and
// offset rules are the server's own (package group's ConsumerGroup, which
// the replicated state machine applies), run here under the fake's lock
// with the group clock instead of Raft: joins, heartbeats, leaves, commits
// with generations, cooperative moves with revocation, session expiry,
// resets that fence, and fetches checked against the generation. What the
// fake leaves out: persistence, leader changes, and the leader's expiry
// ticker (members expire when a group call, a describe or a list runs
// after their session ran out, which is when a test looks).

// groupState is the fake's consumer groups, guarded by Fake.mu.
type groupState struct {
	now    func() time.Time
	groups map[string]*group.ConsumerGroup
	// incarnations numbers topics as they are first seen, so a group's
	// offsets for a topic deleted and created again are dropped.
	incarnations map[*topic]uint64
	// fencedCommits and fencedFetches count refusals by group, like the
	// server's logd_group_fenced_{commits,fetches}_total.
	fencedCommits, fencedFetches map[string]int
}

// fakeGroupStates holds each Fake's group state, kept beside the Fake so
// the groups live in this file alone.
var fakeGroupStates sync.Map // *Fake -> *groupState

// groupsLocked returns f's group state; f.mu must be held.
func (f *Fake) groupsLocked() *groupState {
	if gs, ok := fakeGroupStates.Load(f); ok {
		return gs.(*groupState)
	}
	gs := &groupState{now: f.now, groups: map[string]*group.ConsumerGroup{}, incarnations: map[*topic]uint64{},
		fencedCommits: map[string]int{}, fencedFetches: map[string]int{}}
	fakeGroupStates.Store(f, gs)
	return gs
}

// existing returns the group called name, or the server's not-found error.
func (gs *groupState) existing(name string) (*group.ConsumerGroup, error) {
	g, ok := gs.groups[name]
	if !ok {
		return nil, groupError(fmt.Errorf("%w: %q", group.ErrConsumerGroupNotFound, name))
	}
	return g, nil
}

// SetGroupClock sets the clock of the fake's consumer groups (session
// expiry, commit times, lag); by default it is the fake's clock. Tests of
// session timeouts move it forward.
func (f *Fake) SetGroupClock(now func() time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.groupsLocked().now = now
}

// FencedCommits and FencedFetches return how many commits and group
// fetches of group were refused as stale or from a non-member.
func (f *Fake) FencedCommits(groupName string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.groupsLocked().fencedCommits[groupName]
}

// FencedFetches: see FencedCommits.
func (f *Fake) FencedFetches(groupName string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.groupsLocked().fencedFetches[groupName]
}

// Group returns a copy of a consumer group's state, or nil.
func (f *Fake) Group(name string) *group.ConsumerGroup {
	f.mu.Lock()
	defer f.mu.Unlock()
	if g, ok := f.groupsLocked().groups[name]; ok {
		return g.Clone()
	}
	return nil
}

// fakeTopics answers group.Topics from the fake's topics; f.mu is held.
type fakeTopics struct{ f *Fake }

func (t fakeTopics) Topic(name string) (int32, uint64, bool) {
	tp, ok := t.f.topics[name]
	if !ok {
		return 0, 0, false
	}
	gs := t.f.groupsLocked()
	inc, ok := gs.incarnations[tp]
	if !ok {
		inc = uint64(len(gs.incarnations) + 1)
		gs.incarnations[tp] = inc
	}
	return int32(len(tp.partitions)), inc, true
}

func (t fakeTopics) EndOffset(name string, part int32) int64 {
	tp, ok := t.f.topics[name]
	if !ok || part < 0 || int(part) >= len(tp.partitions) {
		return 0
	}
	return tp.partitions[part].end()
}

// partitionLocked returns a partition or nil; f.mu is held.
func (f *Fake) partitionLocked(name string, part int32) *partition {
	t, ok := f.topics[name]
	if !ok || part < 0 || int(part) >= len(t.partitions) {
		return nil
	}
	return t.partitions[part]
}

// groupError maps group errors as the server does (server/group_errors.go).
func groupError(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	r := func(code connect.Code, reason logdv1.Reason) error {
		return reasonError(code, reason, "%s", err.Error())
	}
	switch {
	case errors.Is(err, group.ErrStaleGeneration), errors.Is(err, group.ErrNotAssigned):
		return r(connect.CodeFailedPrecondition, logdv1.Reason_REASON_STALE_GENERATION)
	case errors.Is(err, group.ErrUnknownMember):
		return r(connect.CodeFailedPrecondition, logdv1.Reason_REASON_UNKNOWN_MEMBER)
	case errors.Is(err, group.ErrConsumerGroupNotFound):
		return r(connect.CodeNotFound, logdv1.Reason_REASON_UNKNOWN_GROUP)
	case errors.Is(err, group.ErrConsumerGroupNotEmpty):
		return r(connect.CodeFailedPrecondition, logdv1.Reason_REASON_GROUP_NOT_EMPTY)
	case errors.Is(err, group.ErrOffsetAboveEnd), errors.Is(err, group.ErrNoResetPolicy):
		return r(connect.CodeOutOfRange, logdv1.Reason_REASON_OFFSET_OUT_OF_RANGE)
	case errors.Is(err, group.ErrUnknownGroupTopic):
		return r(connect.CodeNotFound, logdv1.Reason_REASON_UNKNOWN_TOPIC)
	}
	return r(connect.CodeInvalidArgument, logdv1.Reason_REASON_INVALID_ARGUMENT)
}

func fenced(err error) bool {
	return errors.Is(err, group.ErrStaleGeneration) || errors.Is(err, group.ErrNotAssigned) || errors.Is(err, group.ErrUnknownMember)
}

// mutateGroupLocked runs fn on a group (made if create and missing, and
// kept only if fn succeeds on it); f.mu is held.
func (f *Fake) mutateGroupLocked(name string, create bool, fn func(g *group.ConsumerGroup, now int64) error) error {
	if err := group.ValidateName("group", name); err != nil {
		return err
	}
	gs := f.groupsLocked()
	g, ok := gs.groups[name]
	if !ok {
		if !create {
			return fmt.Errorf("%w: %q", group.ErrConsumerGroupNotFound, name)
		}
		g = group.NewConsumerGroup(name)
	}
	if err := fn(g, gs.now().UnixNano()); err != nil {
		return err
	}
	gs.groups[name] = g
	return nil
}

// boundsLocked returns a partition's log start and end; f.mu is held.
func (f *Fake) boundsLocked(topic string, partition int32) (start, end int64, ok bool) {
	part := f.partitionLocked(topic, partition)
	if part == nil {
		return 0, 0, false
	}
	return part.logStart, part.end(), true
}

func (f *Fake) memberPolicyLocked(groupName, member string) group.ResetPolicy {
	if g, ok := f.groupsLocked().groups[groupName]; ok {
		if m, ok := g.Members[member]; ok {
			return m.Reset
		}
	}
	return group.ResetEarliest
}

// JoinGroup implements logdv1connect.LogServiceHandler.
func (f *Fake) JoinGroup(ctx context.Context, req *connect.Request[logdv1.JoinGroupRequest]) (*connect.Response[logdv1.JoinGroupResponse], error) {
	if err := f.enter(ctx, "JoinGroup"); err != nil {
		return nil, err
	}
	m := req.Msg
	if m.SessionTimeoutMs < 0 {
		return nil, reasonError(connect.CodeInvalidArgument, logdv1.Reason_REASON_INVALID_ARGUMENT, "negative session timeout %d ms", m.SessionTimeoutMs)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var a group.Assignment
	err := f.mutateGroupLocked(m.Group, true, func(g *group.ConsumerGroup, now int64) (err error) {
		a, err = g.Join(now, group.JoinRequest{Member: m.MemberId, Topics: m.Topics,
			SessionTimeout: time.Duration(m.SessionTimeoutMs) * time.Millisecond, Reset: group.ResetPolicy(m.ResetPolicy)}, fakeTopics{f})
		return err
	})
	if err != nil {
		return nil, groupError(err)
	}
	policy, _ := group.ParseResetPolicy(m.ResetPolicy)
	return connect.NewResponse(&logdv1.JoinGroupResponse{Assignment: groupapi.Assignment(a, policy, f.boundsLocked)}), nil
}

// GroupHeartbeat implements logdv1connect.LogServiceHandler.
func (f *Fake) GroupHeartbeat(ctx context.Context, req *connect.Request[logdv1.GroupHeartbeatRequest]) (*connect.Response[logdv1.GroupHeartbeatResponse], error) {
	if err := f.enter(ctx, "GroupHeartbeat"); err != nil {
		return nil, err
	}
	m := req.Msg
	var released []group.TopicPartition
	for _, tp := range m.Released {
		released = append(released, group.TopicPartition{Topic: tp.GetTopic(), Partition: tp.GetPartition()})
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var a group.Assignment
	err := f.mutateGroupLocked(m.Group, false, func(g *group.ConsumerGroup, now int64) (err error) {
		a, err = g.Heartbeat(now, m.MemberId, released, fakeTopics{f})
		return err
	})
	if err != nil {
		return nil, groupError(err)
	}
	return connect.NewResponse(&logdv1.GroupHeartbeatResponse{Assignment: groupapi.Assignment(a, f.memberPolicyLocked(m.Group, m.MemberId), f.boundsLocked)}), nil
}

// LeaveGroup implements logdv1connect.LogServiceHandler.
func (f *Fake) LeaveGroup(ctx context.Context, req *connect.Request[logdv1.LeaveGroupRequest]) (*connect.Response[logdv1.LeaveGroupResponse], error) {
	if err := f.enter(ctx, "LeaveGroup"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.mutateGroupLocked(req.Msg.Group, false, func(g *group.ConsumerGroup, now int64) error {
		g.Leave(now, req.Msg.MemberId, fakeTopics{f})
		return nil
	})
	if err != nil {
		return nil, groupError(err)
	}
	return connect.NewResponse(&logdv1.LeaveGroupResponse{}), nil
}

// CommitOffsets implements logdv1connect.LogServiceHandler.
func (f *Fake) CommitOffsets(ctx context.Context, req *connect.Request[logdv1.CommitOffsetsRequest]) (*connect.Response[logdv1.CommitOffsetsResponse], error) {
	if err := f.enter(ctx, "CommitOffsets"); err != nil {
		return nil, err
	}
	m := req.Msg
	var offsets []group.OffsetCommit
	for _, o := range m.Offsets {
		offsets = append(offsets, group.OffsetCommit{TopicPartition: group.TopicPartition{Topic: o.GetTopic(), Partition: o.GetPartition()}, Offset: o.GetOffset()})
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.mutateGroupLocked(m.Group, false, func(g *group.ConsumerGroup, now int64) error {
		return g.Commit(now, m.MemberId, m.Generation, offsets, fakeTopics{f})
	})
	if err != nil {
		if fenced(err) {
			f.groupsLocked().fencedCommits[m.Group]++
		}
		return nil, groupError(err)
	}
	return connect.NewResponse(&logdv1.CommitOffsetsResponse{}), nil
}

// GroupFetch implements logdv1connect.LogServiceHandler: a fetch served
// only to the partition's owner at the generation, long polls included.
// An offset below the log start follows the member's reset policy.
func (f *Fake) GroupFetch(ctx context.Context, req *connect.Request[logdv1.GroupFetchRequest]) (*connect.Response[logdv1.GroupFetchResponse], error) {
	if err := f.enter(ctx, "GroupFetch"); err != nil {
		return nil, err
	}
	m := req.Msg
	if m.Fetch == nil {
		return nil, reasonError(connect.CodeInvalidArgument, logdv1.Reason_REASON_INVALID_ARGUMENT, "group fetch without a fetch")
	}
	fr := &logdv1.FetchRequest{Topic: m.Fetch.Topic, Partition: m.Fetch.Partition, Offset: m.Fetch.Offset,
		MaxBytes: m.Fetch.MaxBytes, MaxRecords: m.Fetch.MaxRecords, MaxWaitMs: m.Fetch.MaxWaitMs}
	out := &logdv1.GroupFetchResponse{}
	if err := f.checkGroupFetch(m, fr, out); err != nil {
		return nil, err
	}
	resp, err := f.longPoll(ctx, fr)
	if err != nil {
		return nil, err
	}
	out.Fetch = resp
	return connect.NewResponse(out), nil
}

// checkGroupFetch refuses a fetch by a non-owner and applies the reset
// policy to an offset below the log start, moving fr and noting it in out.
func (f *Fake) checkGroupFetch(m *logdv1.GroupFetchRequest, fr *logdv1.FetchRequest, out *logdv1.GroupFetchResponse) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	gs := f.groupsLocked()
	tp := group.TopicPartition{Topic: fr.Topic, Partition: fr.Partition}
	g, err := gs.existing(m.Group)
	if err != nil {
		return err
	}
	if err := g.CheckFetch(gs.now().UnixNano(), m.MemberId, m.Generation, tp); err != nil {
		if fenced(err) {
			gs.fencedFetches[m.Group]++
		}
		return groupError(err)
	}
	part := f.partitionLocked(tp.Topic, tp.Partition)
	if part == nil || fr.Offset < 0 || fr.Offset >= part.logStart {
		return nil // Fetch's own checks answer the rest
	}
	policy := f.memberPolicyLocked(m.Group, m.MemberId)
	to, ok := group.AutoResetTarget(policy, part.logStart, part.end())
	if !ok {
		return groupError(fmt.Errorf("%w: group %q at %d in %s-%d, log starts at %d",
			group.ErrNoResetPolicy, m.Group, fr.Offset, tp.Topic, tp.Partition, part.logStart))
	}
	var committed int64
	err = f.mutateGroupLocked(m.Group, false, func(g *group.ConsumerGroup, now int64) (err error) {
		committed, err = g.AutoReset(now, m.MemberId, m.Generation, tp, fr.Offset, to, fakeTopics{f})
		return err
	})
	if err != nil {
		return groupError(err)
	}
	out.AutoReset, out.ResetFrom, out.ResetTo = true, fr.Offset, committed
	fr.Offset = committed
	return nil
}

// ListGroups implements logdv1connect.LogServiceHandler.
func (f *Fake) ListGroups(ctx context.Context, _ *connect.Request[logdv1.ListGroupsRequest]) (*connect.Response[logdv1.ListGroupsResponse], error) {
	if err := f.enter(ctx, "ListGroups"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	gs := f.groupsLocked()
	resp := &logdv1.ListGroupsResponse{}
	for _, name := range slices.Sorted(maps.Keys(gs.groups)) {
		g := gs.groups[name]
		g.Expire(gs.now().UnixNano(), fakeTopics{f})
		resp.Groups = append(resp.Groups, &logdv1.ConsumerGroupSummary{
			Group: g.Name, State: string(g.State()), Members: int32(len(g.Members)), Generation: g.Generation, Topics: g.TopicNames(),
		})
	}
	return connect.NewResponse(resp), nil
}

// DescribeGroup implements logdv1connect.LogServiceHandler.
func (f *Fake) DescribeGroup(ctx context.Context, req *connect.Request[logdv1.DescribeGroupRequest]) (*connect.Response[logdv1.DescribeGroupResponse], error) {
	if err := f.enter(ctx, "DescribeGroup"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	gs := f.groupsLocked()
	g, err := gs.existing(req.Msg.Group)
	if err != nil {
		return nil, err
	}
	now := gs.now()
	g.Expire(now.UnixNano(), fakeTopics{f})
	resp := groupapi.Describe(g, func(topic string, partition int32, committed int64) (groupapi.Lag, bool) {
		part := f.partitionLocked(topic, partition)
		if part == nil {
			return groupapi.Lag{}, false
		}
		l := groupapi.Lag{Start: part.logStart, End: part.end(), Records: group.LagRecords(committed, part.logStart, part.end())}
		if l.Records > 0 {
			oldest := part.records[max(committed, part.logStart)-part.logStart]
			l.Seconds = max(now.Sub(time.UnixMilli(oldest.GetTimestampMs())).Seconds(), 0)
		}
		return l, true
	})
	return connect.NewResponse(resp), nil
}

// DeleteGroup implements logdv1connect.LogServiceHandler: a group with
// live members is refused.
func (f *Fake) DeleteGroup(ctx context.Context, req *connect.Request[logdv1.DeleteGroupRequest]) (*connect.Response[logdv1.DeleteGroupResponse], error) {
	if err := f.enter(ctx, "DeleteGroup"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	gs := f.groupsLocked()
	g, err := gs.existing(req.Msg.Group)
	if err != nil {
		return nil, err
	}
	g.Expire(gs.now().UnixNano(), fakeTopics{f})
	if len(g.Members) > 0 {
		return nil, groupError(fmt.Errorf("%w: %q has %d", group.ErrConsumerGroupNotEmpty, req.Msg.Group, len(g.Members)))
	}
	delete(gs.groups, req.Msg.Group)
	return connect.NewResponse(&logdv1.DeleteGroupResponse{}), nil
}

// ResetGroupOffsets implements logdv1connect.LogServiceHandler: the plan
// (package group's PlanReset per selected partition) and, with execute,
// the reset applied at once, fencing the members on those partitions.
func (f *Fake) ResetGroupOffsets(ctx context.Context, req *connect.Request[logdv1.ResetGroupOffsetsRequest]) (*connect.Response[logdv1.ResetGroupOffsetsResponse], error) {
	if err := f.enter(ctx, "ResetGroupOffsets"); err != nil {
		return nil, err
	}
	m := req.Msg
	if err := group.ValidateName("group", m.Group); err != nil {
		return nil, groupError(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	gs := f.groupsLocked()
	g, ok := gs.groups[m.Group]
	if !ok {
		g = group.NewConsumerGroup(m.Group)
	}
	spec, explicit, err := fakeResetSpec(m, gs.now())
	if err != nil {
		return nil, err
	}
	targets, err := f.resetTargetsLocked(m, g, explicit)
	if err != nil {
		return nil, err
	}
	resp := &logdv1.ResetGroupOffsetsResponse{}
	var offsets []group.OffsetCommit
	for _, tp := range targets {
		part := f.partitionLocked(tp.Topic, tp.Partition)
		b := group.PartitionBounds{Start: part.logStart, End: part.end(), AtTime: part.end()}
		ps := spec
		if explicit != nil {
			ps = group.ResetSpec{Strategy: group.ToOffset, Offset: explicit[tp]}
		}
		if ps.Strategy == group.ToTime {
			for _, r := range part.records {
				if r.GetTimestampMs() >= ps.Time.UnixMilli() {
					b.AtTime = r.GetOffset()
					break
				}
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
		err := f.mutateGroupLocked(m.Group, true, func(g *group.ConsumerGroup, now int64) error {
			if err := g.ResetOffsets(now, offsets, fakeTopics{f}); err != nil {
				return err
			}
			resp.Generation = g.Generation
			return nil
		})
		if err != nil {
			return nil, groupError(err)
		}
		resp.Executed = true
	}
	return connect.NewResponse(resp), nil
}

// fakeResetSpec reads a reset request with group.ParseReset.
func fakeResetSpec(m *logdv1.ResetGroupOffsetsRequest, now time.Time) (group.ResetSpec, map[group.TopicPartition]int64, error) {
	r := group.ResetRequest{Strategy: m.Strategy, Offset: m.Offset, Shift: m.ShiftBy, TimestampMs: m.TimestampMs, DurationMs: m.DurationMs}
	for _, o := range m.Offsets {
		if o == nil {
			return group.ResetSpec{}, nil, groupError(fmt.Errorf("%w: explicit reset: empty entry", group.ErrInvalidGroupRequest))
		}
		r.Explicit = append(r.Explicit, group.PartitionOffset{TopicPartition: group.TopicPartition{Topic: o.Topic, Partition: o.Partition}, Offset: o.Offset})
	}
	spec, explicit, err := group.ParseReset(r, now)
	if err != nil {
		return group.ResetSpec{}, nil, groupError(err)
	}
	return spec, explicit, nil
}

// resetTargetsLocked lists the partitions a reset selects, in order; f.mu
// is held.
func (f *Fake) resetTargetsLocked(m *logdv1.ResetGroupOffsetsRequest, g *group.ConsumerGroup, explicit map[group.TopicPartition]int64) ([]group.TopicPartition, error) {
	var out []group.TopicPartition
	seen := map[group.TopicPartition]bool{}
	addTopic := func(name string, parts []int32) error {
		t, ok := f.topics[name]
		if !ok {
			return unknownTopic(name)
		}
		if len(parts) == 0 {
			for i := range t.partitions {
				parts = append(parts, int32(i))
			}
		}
		for _, p := range parts {
			if p < 0 || int(p) >= len(t.partitions) {
				return reasonError(connect.CodeNotFound, logdv1.Reason_REASON_UNKNOWN_PARTITION, "topic %q has no partition %d", name, p)
			}
			if tp := (group.TopicPartition{Topic: name, Partition: p}); !seen[tp] {
				seen[tp] = true
				out = append(out, tp)
			}
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
			return nil, groupError(fmt.Errorf("%w: %q has no topics", group.ErrConsumerGroupNotFound, m.Group))
		}
		for _, n := range names {
			if _, ok := f.topics[n]; !ok {
				continue // deleted since: nothing to reset
			}
			if err := addTopic(n, nil); err != nil {
				return nil, err
			}
		}
	default:
		if len(m.Topics) == 0 {
			return nil, reasonError(connect.CodeInvalidArgument, logdv1.Reason_REASON_INVALID_ARGUMENT, "reset of group %q: name topics or all topics", m.Group)
		}
		for _, t := range m.Topics {
			if err := addTopic(t.GetTopic(), t.GetPartitions()); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
