package server

import (
	"context"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
)

// RemoveNode removes a node from the cluster (on the leader; followers
// forward it).
func (s *Server) RemoveNode(ctx context.Context, req *connect.Request[logdv1.RemoveNodeRequest]) (*connect.Response[logdv1.RemoveNodeResponse], error) {
	if req.Msg.NodeId == "" {
		return nil, errInvalid("remove: node_id is required")
	}
	if err := s.b.RemoveNode(ctx, req.Msg.NodeId); err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&logdv1.RemoveNodeResponse{}), nil
}
