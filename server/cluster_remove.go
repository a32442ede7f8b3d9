package server

import (
	"context"
	"fmt"
	"slices"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
)

// RemoveNode removes a node from the cluster (on the leader; followers
// forward it).
func (s *Server) RemoveNode(ctx context.Context, req *connect.Request[logdv1.RemoveNodeRequest]) (*connect.Response[logdv1.RemoveNodeResponse], error) {
	if req.Msg.NodeId == "" {
		return nil, errInvalid("remove: node_id is required")
	}
	if !req.Msg.Force {
		for _, g := range s.b.Status().DataGroups {
			if slices.Contains(g.Replicas, req.Msg.NodeId) {
				return nil, toConnectError(fmt.Errorf("remove %s: %w (data group %d and maybe others): drain it first (logctl cluster drain %s), or force the removal",
					req.Msg.NodeId, backend.ErrNodeHoldsReplicas, g.ID, req.Msg.NodeId))
			}
		}
	}
	if err := s.b.RemoveNode(ctx, req.Msg.NodeId); err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&logdv1.RemoveNodeResponse{}), nil
}

// DrainNode starts or ends the drain of a node's data group replicas (on
// the leader; followers forward it).
func (s *Server) DrainNode(ctx context.Context, req *connect.Request[logdv1.DrainNodeRequest]) (*connect.Response[logdv1.DrainNodeResponse], error) {
	if req.Msg.NodeId == "" {
		return nil, errInvalid("drain: node_id is required")
	}
	draining, err := s.b.DrainNode(ctx, req.Msg.NodeId, req.Msg.Undo)
	if err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&logdv1.DrainNodeResponse{Draining: draining}), nil
}
