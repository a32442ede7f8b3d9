package server

import (
	"context"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/queue"
)

// AlterQueueGroup changes the settings a request sets; the others keep
// their values.
func (s *Server) AlterQueueGroup(ctx context.Context, req *connect.Request[logdv1.AlterQueueGroupRequest]) (*connect.Response[logdv1.AlterQueueGroupResponse], error) {
	m := req.Msg
	if err := validateQueueNames(m.Topic, m.Group); err != nil {
		return nil, err
	}
	var changeErr error
	out, err := s.b.AlterQueueGroup(ctx, m.Topic, m.Group, func(cfg *queue.Config) {
		changeErr = queueConfigChange(m.Config, cfg)
	})
	if changeErr != nil {
		return nil, changeErr
	}
	if err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&logdv1.AlterQueueGroupResponse{Config: queueConfigProto(out)}), nil
}
