package server

import (
	"context"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
)

// GroupHeartbeat keeps a member alive, completes the moves of partitions it
// released, and returns its assignment.
func (s *Server) GroupHeartbeat(ctx context.Context, req *connect.Request[logdv1.GroupHeartbeatRequest]) (*connect.Response[logdv1.GroupHeartbeatResponse], error) {
	m := req.Msg
	hb := backend.GroupHeartbeat{Group: m.Group, Member: m.MemberId}
	for _, tp := range m.Released {
		if tp == nil {
			return nil, errInvalid("empty released partition")
		}
		hb.Released = append(hb.Released, group.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	a, err := s.b.GroupHeartbeat(ctx, hb)
	if err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&logdv1.GroupHeartbeatResponse{Assignment: assignmentMsg(a, s.memberPolicy(m.Group, m.MemberId), s.bounds)}), nil
}
