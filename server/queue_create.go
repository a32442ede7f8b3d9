package server

import (
	"context"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/queue"
)

// CreateQueueGroup creates a queue group on a topic with its settings
// (unset ones take their defaults) and its dead-letter topic when missing.
func (s *Server) CreateQueueGroup(ctx context.Context, req *connect.Request[logdv1.CreateQueueGroupRequest]) (*connect.Response[logdv1.CreateQueueGroupResponse], error) {
	m := req.Msg
	if err := validateQueueNames(m.Topic, m.Group); err != nil {
		return nil, err
	}
	var cfg queue.Config
	if err := queueConfigChange(m.Config, &cfg); err != nil {
		return nil, err
	}
	if m.Config != nil && m.Config.DeadlineHeader != nil && *m.Config.DeadlineHeader == "" {
		return nil, errInvalid("deadline header is empty; use %q for none", queue.NoDeadlineHeader)
	}
	out, err := s.b.CreateQueueGroup(ctx, backend.QueueCreate{Topic: m.Topic, Group: m.Group, Config: cfg, FromEnd: m.FromEnd})
	if err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&logdv1.CreateQueueGroupResponse{Config: queueConfigProto(out)}), nil
}
