package server

import (
	"context"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
)

// ListOffsets returns a partition's bounds and, for a timestamp, the first
// offset at or after it, from the log's time index.
func (s *Server) ListOffsets(ctx context.Context, req *connect.Request[logdv1.ListOffsetsRequest]) (*connect.Response[logdv1.ListOffsetsResponse], error) {
	m := req.Msg
	o, err := s.b.Offsets(m.Topic, m.Partition)
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
