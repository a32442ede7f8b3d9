package server

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
)

// Status reports this node's view of the Raft group.
func (s *Server) Status(ctx context.Context, req *connect.Request[logdv1.StatusRequest]) (*connect.Response[logdv1.StatusResponse], error) {
	st := s.b.Status()
	resp := &logdv1.StatusResponse{
		NodeId: st.NodeID, State: st.State, LeaderId: st.LeaderID, LeaderAddress: st.LeaderAddr,
		Term: st.Term, CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex, LastLogIndex: st.LastLogIndex,
		ApiAddress: s.b.APIAddress(), Ready: s.b.Ready(),
		BuildLevel: uint32(st.BuildLevel), AppliedLevel: uint32(st.AppliedLevel), ClusterLevel: uint32(st.ClusterLevel),
	}
	if addr, _ := s.b.LeaderAPIAddress(); addr != "" {
		// Clients want the leader's client address, not its Raft one.
		resp.LeaderAddress = addr
	}
	for _, m := range st.Members {
		api, _ := s.b.NodeAPIAddress(m.ID)
		resp.Members = append(resp.Members, &logdv1.Member{Id: m.ID, RaftAddress: m.Address, Suffrage: m.Suffrage, ApiAddress: api,
			FeatureLevel: uint32(m.FeatureLevel)})
	}
	m := s.b.RaftMetrics()
	resp.LeaderChanges = m.LeaderChanges
	now := time.Now()
	for _, f := range m.Followers {
		fs := &logdv1.FollowerStatus{Id: f.ID, LastIndex: f.LastIndex}
		if m.LastIndex > f.LastIndex {
			fs.Lag = m.LastIndex - f.LastIndex
		}
		if !f.LastContact.IsZero() {
			age := now.Sub(f.LastContact).Milliseconds()
			fs.LastContactAgeMs = &age
		}
		resp.Followers = append(resp.Followers, fs)
	}
	for _, g := range st.DataGroups {
		resp.DataGroups = append(resp.DataGroups, &logdv1.DataGroupStatus{Id: g.ID, Replicas: g.Replicas, State: g.State, LeaderId: g.LeaderID,
			Term: g.Term, CommitIndex: g.CommitIndex, AppliedIndex: g.AppliedIndex, Voters: g.Voters,
			Partitions: uint32(g.Partitions), Bytes: g.Bytes})
	}
	if du, err := s.b.DiskUsage(); err == nil {
		resp.Disk = &logdv1.DiskStatus{TotalBytes: du.Total, AvailBytes: du.Avail}
	}
	return connect.NewResponse(resp), nil
}
