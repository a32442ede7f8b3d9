package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/replication"
)

// joinMaxLag is how many entries a non-voter may still be behind the
// leader's commit index when it is promoted to voter.
const joinMaxLag = 64

// Join adds a node (on the leader; followers forward it). The new node is
// a non-voter until its own Status shows it has applied all but joinMaxLag
// of the leader's committed entries; then it is promoted to voter.
func (s *Server) Join(ctx context.Context, req *connect.Request[logdv1.JoinRequest]) (*connect.Response[logdv1.JoinResponse], error) {
	m := req.Msg
	if m.NodeId == "" || m.RaftAddress == "" {
		return nil, errInvalid("join: node_id and raft_address are required")
	}
	err := s.b.Join(ctx, replication.JoinRequest{ID: m.NodeId, RaftAddress: m.RaftAddress, APIAddress: m.ApiAddress, FeatureLevel: replication.FeatureLevel(m.FeatureLevel)},
		func(ctx context.Context) error { return s.waitCaughtUp(ctx, m.NodeId, m.ApiAddress) })
	if err != nil {
		return nil, toConnectError(err)
	}
	return connect.NewResponse(&logdv1.JoinResponse{LeaderId: s.b.NodeID()}), nil
}

// waitCaughtUp polls the joining node's Status until it is ready and its
// applied index is within joinMaxLag of this leader's commit index.
func (s *Server) waitCaughtUp(ctx context.Context, id, addr string) error {
	if addr == "" {
		return nil // nothing to ask: promote at once
	}
	c := logdv1connect.NewLogServiceClient(&http.Client{Timeout: 2 * time.Second}, "http://"+addr)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	var last error
	for {
		st, err := c.Status(ctx, connect.NewRequest(&logdv1.StatusRequest{}))
		if err == nil {
			commit := s.b.Status().CommitIndex
			if st.Msg.Ready && st.Msg.AppliedIndex+joinMaxLag >= commit {
				return nil
			}
			last = fmt.Errorf("node %s applied %d of %d", id, st.Msg.AppliedIndex, commit)
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-t.C:
		}
	}
}
