package server

import (
	"context"
	"errors"
	"sync"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
)

// DescribeTopic returns a topic's settings and each partition's state on
// this node.
func (s *Server) DescribeTopic(ctx context.Context, req *connect.Request[logdv1.DescribeTopicRequest]) (*connect.Response[logdv1.DescribeTopicResponse], error) {
	t, err := s.b.DescribeTopic(req.Msg.Name)
	if err != nil {
		return nil, toConnectError(err)
	}
	if req.Header().Get(ConsistentReadHeader) == "true" {
		// The read index orders the meta group only: a partition of a
		// data group takes its bounds from the group's leader, as a
		// consistent ListOffsets does (a consume's end offsets at its
		// start, logctl consume --consistent).
		if err := s.leaderBounds(ctx, req.Msg.Name, t.Partitions); err != nil {
			return nil, toConnectError(err)
		}
	}
	resp := &logdv1.DescribeTopicResponse{Topic: topicInfo(t.Topic)}
	for _, p := range t.Partitions {
		pi := &logdv1.PartitionInfo{
			Partition:         p.Partition,
			LogStartOffset:    p.LogStartOffset,
			EndOffset:         p.EndOffset,
			Bytes:             p.Bytes,
			Segments:          p.Segments,
			CompactedSegments: p.CompactedSegments,
			DataGroup:         p.Group,
			Leader:            p.Leader,
		}
		if r := p.LastCleanerRun; r != nil {
			pi.LastCleanerRun = &logdv1.CleanerRun{
				TimeMs: r.TimeNanos / 1e6, Action: r.Action, BytesDeleted: r.BytesDeleted, RecordsRemoved: r.RecordsRemoved,
			}
		}
		resp.Partitions = append(resp.Partitions, pi)
	}
	return connect.NewResponse(resp), nil
}

// leaderBounds sets the bounds of the partitions of data groups among ps
// from their groups' leaders, asked in parallel.
func (s *Server) leaderBounds(ctx context.Context, topic string, ps []backend.PartitionState) error {
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i := range ps {
		if ps[i].Group == 0 {
			continue
		}
		wg.Go(func() {
			o, err := s.b.OffsetsLeader(ctx, topic, ps[i].Partition)
			if err != nil {
				errs[i] = err
				return
			}
			ps[i].LogStartOffset, ps[i].EndOffset = o.LogStart, o.End
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
