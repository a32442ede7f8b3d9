package server

import (
	"context"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
)

// Status reports this node's view of the Raft group.
func (s *Server) Status(ctx context.Context, req *connect.Request[logdv1.StatusRequest]) (*connect.Response[logdv1.StatusResponse], error) {
	st := s.node.Status()
	resp := &logdv1.StatusResponse{
		NodeId: st.NodeID, State: st.State, LeaderId: st.LeaderID, LeaderAddress: st.LeaderAddr,
		Term: st.Term, CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex, LastLogIndex: st.LastLogIndex,
	}
	for _, m := range st.Members {
		resp.Members = append(resp.Members, &logdv1.Member{Id: m.ID, RaftAddress: m.Address, Suffrage: m.Suffrage})
	}
	return connect.NewResponse(resp), nil
}
