package server

import (
	"context"
	"errors"
	"net/http"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/backend"
)

// ConsistentReadHeader, set to "true" on a read (any call a node serves
// from its own state: Fetch, ListOffsets, GroupFetch, the describes),
// asks for a linearizable start: the node learns the leader's ReadIndex
// (from itself, or from the leader over the peer calls) and waits, at
// most readFloorWait, until it has applied it, so the answer holds every
// write acknowledged before the call (docs/architecture.md, "Read
// guarantees").
const ConsistentReadHeader = "Logd-Consistent-Read"

// ReadIndex answers the leader's read index (backend.API.ReadIndex); a
// follower forwards the call to the leader like a write.
func (s *Server) ReadIndex(ctx context.Context, _ *connect.Request[logdv1.ReadIndexRequest]) (*connect.Response[logdv1.ReadIndexResponse], error) {
	i, err := s.b.ReadIndex()
	if err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&logdv1.ReadIndexResponse{Index: i}), nil
}

// readIndex returns the leader's read index for a consistent read: its
// own when this node leads, else the leader's, asked on the caller's
// behalf as a forwarded call is.
func (s *Server) readIndex(ctx context.Context, req connect.AnyRequest) (uint64, error) {
	if s.b.IsLeader() {
		i, err := s.b.ReadIndex()
		if err != nil {
			return 0, toConnectError(err)
		}
		return i, nil
	}
	addr, _ := s.b.LeaderCallAddress()
	if addr == "" || req.Header().Get(ForwardedHeader) != "" {
		return 0, toConnectError(errors.Join(backend.ErrNotLeader, errors.New("a consistent read needs the leader's read index, and no leader is known")))
	}
	call := connect.NewRequest(&logdv1.ReadIndexRequest{})
	s.onBehalf(ctx, req.Header(), call.Header())
	resp, err := logdv1connect.NewLogServiceClient(s.leaderHTTP, s.peerHTTP.URL(addr)).ReadIndex(ctx, call)
	if err != nil {
		return 0, err
	}
	return resp.Msg.Index, nil
}

// onBehalf sets the headers of a call this node makes to the leader for
// the caller of the call in ctx (whose headers are in): the call is
// forwarded, with the caller's credentials and principal, as the
// forwarder sends a write (forward.go).
func (s *Server) onBehalf(ctx context.Context, in, out http.Header) {
	out.Set(ForwardedHeader, s.b.NodeID())
	if a := in.Get("Authorization"); a != "" {
		out.Set("Authorization", a)
	}
	forwardPrincipal(ctx, out)
}
