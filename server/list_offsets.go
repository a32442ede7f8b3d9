package server

import (
	"context"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
)

// ListOffsets returns a partition's bounds and, for a timestamp, the first
// offset at or after it, from the log's time index.
func (s *Server) ListOffsets(ctx context.Context, req *connect.Request[logdv1.ListOffsetsRequest]) (*connect.Response[logdv1.ListOffsetsResponse], error) {
	m := req.Msg
	// A consistent read of a partition of a data group asks the group's
	// leader (fetch.go).
	offsets := s.b.Offsets
	if req.Header().Get(ConsistentReadHeader) == "true" {
		offsets = func(topic string, p int32) (backend.Offsets, error) { return s.b.OffsetsLeader(ctx, topic, p) }
	}
	o, err := offsets(m.Topic, m.Partition)
	if err != nil {
		return nil, toConnectError(err)
	}
	resp := &logdv1.ListOffsetsResponse{LogStartOffset: o.LogStart, EndOffset: o.End}
	if m.TimestampMs != nil {
		if *m.TimestampMs < 0 {
			return nil, errInvalid("negative timestamp %d", *m.TimestampMs)
		}
		off, err := s.b.OffsetForTime(m.Topic, m.Partition, *m.TimestampMs)
		if err != nil {
			return nil, toConnectError(err)
		}
		resp.Offset = off
	}
	return connect.NewResponse(resp), nil
}
