package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
)

// groupCatchUpWait bounds how long a node that has not applied a member's
// generation or offset yet waits for it before sending the member to the
// leader (backend.BehindError). A healthy follower trails the leader
// by one commit round (Raft's CommitTimeout, 50 ms); one further behind is
// better left for the leader.
const groupCatchUpWait = time.Second

// GroupFetch is Fetch for a member of a consumer group: it is served only
// if the member owns the partition at the generation it names. A node
// that has not applied that generation yet, nor the member's offset (a
// follower right after the member's join, which it forwarded to the
// leader), waits for them up to groupCatchUpWait. An offset
// below the log start (retention passed the group's position) follows the
// member's reset policy: earliest or latest moves the committed offset
// forward through Raft, counting the skipped records, and the fetch
// continues there; none is an out-of-range error. A refused (fenced) fetch
// is counted in logd_group_fenced_fetches_total.
func (s *Server) GroupFetch(ctx context.Context, req *connect.Request[logdv1.GroupFetchRequest]) (*connect.Response[logdv1.GroupFetchResponse], error) {
	m := req.Msg
	if m.Fetch == nil {
		return nil, errInvalid("group fetch without a fetch")
	}
	tp := group.TopicPartition{Topic: m.Fetch.Topic, Partition: m.Fetch.Partition}
	check := backend.GroupFetchCheck{Group: m.Group, Member: m.MemberId, Generation: m.Generation, Partition: tp, Offset: m.Fetch.Offset}
	if err := s.b.AwaitGroupFetch(ctx, check, groupCatchUpWait); err != nil {
		if errors.Is(err, group.ErrStaleGeneration) || errors.Is(err, group.ErrNotAssigned) || errors.Is(err, group.ErrUnknownMember) {
			s.groupMetrics.fencedFetches.WithLabelValues(m.Group).Inc()
		}
		return nil, toConnectError(err)
	}
	bounds, err := s.b.Offsets(tp.Topic, tp.Partition)
	if err != nil {
		return nil, toConnectError(err)
	}
	out := &logdv1.GroupFetchResponse{}
	if start := bounds.LogStart; m.Fetch.Offset >= 0 && m.Fetch.Offset < start {
		policy := s.memberPolicy(m.Group, m.MemberId)
		to, ok := group.AutoResetTarget(policy, start, bounds.End)
		if !ok {
			return nil, toConnectError(fmt.Errorf("%w: group %q at %d in %s-%d, log starts at %d",
				group.ErrNoResetPolicy, m.Group, m.Fetch.Offset, tp.Topic, tp.Partition, start))
		}
		committed, err := s.b.AutoResetGroupOffset(ctx, backend.GroupAutoReset{
			Group: m.Group, Member: m.MemberId, Generation: m.Generation, Partition: tp, From: m.Fetch.Offset, To: to,
		})
		if err != nil {
			return nil, toConnectError(err)
		}
		s.logger.WarnContext(ctx, "group offset below log start; reset by policy", "group", m.Group, "topic", tp.Topic, "partition", tp.Partition,
			"from", m.Fetch.Offset, "to", committed, "policy", policy)
		out.AutoReset, out.ResetFrom, out.ResetTo = true, m.Fetch.Offset, committed
		f := m.Fetch
		m.Fetch = &logdv1.FetchRequest{Topic: f.Topic, Partition: f.Partition, Offset: committed, MaxBytes: f.MaxBytes, MaxRecords: f.MaxRecords, MaxWaitMs: f.MaxWaitMs, Batches: f.Batches}
	}
	fr := connect.NewRequest(m.Fetch)
	if req.Header().Get(ConsistentReadHeader) == "true" {
		// A consistent group fetch reads as a consistent fetch: of a
		// partition of a data group, at the group's leader.
		fr.Header().Set(ConsistentReadHeader, "true")
	}
	resp, err := s.Fetch(ctx, fr)
	if err != nil {
		return nil, err
	}
	out.Fetch = resp.Msg
	return connect.NewResponse(out), nil
}
