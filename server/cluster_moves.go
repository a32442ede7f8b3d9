package server

import (
	"context"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
)

// ListMoves lists the data group replica moves in progress, from the
// table this node applied (any node answers: it is replicated), each with
// the group's voters as a replica of it reports them.
func (s *Server) ListMoves(ctx context.Context, _ *connect.Request[logdv1.ListMovesRequest]) (*connect.Response[logdv1.ListMovesResponse], error) {
	moves, err := s.b.ListMoves(ctx)
	if err != nil {
		return nil, toConnectError(err)
	}
	resp := &logdv1.ListMovesResponse{NodeId: s.b.NodeID(), Moves: make([]*logdv1.ReplicaMove, 0, len(moves))}
	for _, m := range moves {
		resp.Moves = append(resp.Moves, &logdv1.ReplicaMove{
			Group: m.Group, Replicas: m.Replicas, Added: m.Move.Added, Removed: m.Move.Removed, Reason: m.Move.Reason,
			SinceMs: m.Move.Since.UnixMilli(), AgeMs: m.Age.Milliseconds(),
			Voters: m.Voters, VotersFrom: m.VotersFrom, VotersFromLeader: m.VotersFromLeader, VotersError: m.VotersError,
			AddedVoters: m.AddedVoters(), RemovedVoters: m.RemovedVoters(),
		})
	}
	return connect.NewResponse(resp), nil
}

// PlanBalance answers what the meta leader's balancing would move, from
// the table this node applied; it changes nothing.
func (s *Server) PlanBalance(_ context.Context, _ *connect.Request[logdv1.PlanBalanceRequest]) (*connect.Response[logdv1.PlanBalanceResponse], error) {
	p, err := s.b.PlanBalance()
	if err != nil {
		return nil, toConnectError(err)
	}
	resp := &logdv1.PlanBalanceResponse{NodeId: s.b.NodeID(), Groups: uint32(p.Groups), ReplicationFactor: uint32(p.ReplicationFactor),
		Nodes: p.Nodes, InProgress: uint32(p.InProgress), Blocked: p.Blocked, Truncated: p.Truncated}
	for _, st := range p.Steps {
		resp.Steps = append(resp.Steps, &logdv1.BalanceStep{Step: uint32(st.Step), Kind: st.Kind, Group: st.Group, From: st.From, To: st.To})
	}
	for _, l := range p.Loads {
		resp.Loads = append(resp.Loads, &logdv1.NodeLoad{Node: l.Node, Draining: l.Draining,
			ReplicasBefore: uint32(l.ReplicasBefore), ReplicasAfter: uint32(l.ReplicasAfter),
			LeadsBefore: uint32(l.LeadsBefore), LeadsAfter: uint32(l.LeadsAfter),
			BytesBefore: l.BytesBefore, BytesAfter: l.BytesAfter})
	}
	return connect.NewResponse(resp), nil
}
