package server

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
)

// maxCommitOffsets bounds the offsets of one commit.
const maxCommitOffsets = 100_000

// CommitOffsets commits offsets (next offsets to read) for partitions the
// member owns at the generation. A stale generation is refused and counted
// in logd_group_fenced_commits_total.
func (s *Server) CommitOffsets(ctx context.Context, req *connect.Request[logdv1.CommitOffsetsRequest]) (*connect.Response[logdv1.CommitOffsetsResponse], error) {
	m := req.Msg
	if len(m.Offsets) > maxCommitOffsets {
		return nil, errInvalid("%d offsets in one commit; at most %d", len(m.Offsets), maxCommitOffsets)
	}
	c := backend.GroupCommit{Group: m.Group, Member: m.MemberId, Generation: m.Generation}
	for _, o := range m.Offsets {
		if o == nil {
			return nil, errInvalid("empty offset")
		}
		c.Offsets = append(c.Offsets, group.OffsetCommit{TopicPartition: group.TopicPartition{Topic: o.Topic, Partition: o.Partition}, Offset: o.Offset})
	}
	if err := s.b.CommitGroupOffsets(ctx, c); err != nil {
		if errors.Is(err, group.ErrStaleGeneration) || errors.Is(err, group.ErrNotAssigned) || errors.Is(err, group.ErrUnknownMember) {
			s.groupMetrics.fencedCommits.WithLabelValues(m.Group).Inc()
		}
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&logdv1.CommitOffsetsResponse{}), nil
}
