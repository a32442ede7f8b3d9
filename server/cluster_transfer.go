package server

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
)

// TransferLeadership hands leadership to another voter (on the leader;
// followers forward it) and answers with the new leader when known.
func (s *Server) TransferLeadership(ctx context.Context, req *connect.Request[logdv1.TransferLeadershipRequest]) (*connect.Response[logdv1.TransferLeadershipResponse], error) {
	if err := s.b.TransferLeadership(ctx, req.Msg.NodeId); err != nil {
		return nil, toConnectError(err)
	}
	// The new leader is known once its first heartbeat arrives.
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	deadline := time.After(3 * time.Second)
	addr, id := s.b.LeaderAPIAddress()
	for id == "" {
		select {
		case <-ctx.Done():
		case <-deadline:
		case <-t.C:
			addr, id = s.b.LeaderAPIAddress()
			continue
		}
		break
	}
	return connect.NewResponse(&logdv1.TransferLeadershipResponse{LeaderId: id, LeaderAddress: addr}), nil
}
