package server

import (
	"context"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/partition"
)

// StartRedrive starts a redrive job on the leader (a replicated command);
// the job runs there, and on the next leader after a change, until done,
// failed or stopped.
func (s *Server) StartRedrive(ctx context.Context, req *connect.Request[logdv1.StartRedriveRequest]) (*connect.Response[logdv1.StartRedriveResponse], error) {
	m := req.Msg
	if err := partition.ValidateTopicName(m.DeadLetterTopic); err != nil {
		return nil, errInvalid("dead-letter topic: %v", err)
	}
	if m.Target != "" {
		if err := partition.ValidateTopicName(m.Target); err != nil {
			return nil, errInvalid("target: %v", err)
		}
	}
	if m.MaxRedrives < 0 {
		return nil, errInvalid("max_redrives %d: want 0 (the default) or more", m.MaxRedrives)
	}
	j, err := s.b.StartRedrive(ctx, redriveSpec(m, authFrom(ctx).principal.String()))
	if err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&logdv1.StartRedriveResponse{Job: s.redriveJobProto(j)}), nil
}
