package server_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/server"
)

// movesBackend answers ListMoves and PlanBalance with what it holds, and
// the rest as statusBackend.
type movesBackend struct {
	statusBackend
	moves []backend.MoveState
	plan  backend.BalancePlan
}

func (b *movesBackend) ListMoves(context.Context) ([]backend.MoveState, error) { return b.moves, nil }
func (b *movesBackend) PlanBalance() (backend.BalancePlan, error)              { return b.plan, nil }

// TestListMovesAndPlanBalance: the answers carry every field of the
// backend's moves and plan, with the added replicas already voters and
// the removed ones still voters worked out, and the node that answered.
func TestListMovesAndPlanBalance(t *testing.T) {
	since := time.UnixMilli(1_700_000_000_123)
	b := &movesBackend{
		moves: []backend.MoveState{{Group: 3, Replicas: []string{"n1", "n3", "n4"},
			Move:   backend.ReplicaMove{Added: []string{"n4"}, Removed: []string{"n2"}, Reason: "node n2 drained", Since: since},
			Age:    12 * time.Second,
			Voters: []string{"n1", "n2", "n3", "n4"}, VotersFrom: "n3", VotersFromLeader: true}},
		plan: backend.BalancePlan{Groups: 4, ReplicationFactor: 3, Nodes: []string{"n1", "n4"}, InProgress: 1, Blocked: "", Truncated: true,
			Steps: []backend.BalanceStep{{Step: 1, Kind: backend.BalanceReplica, Group: 2, From: "n1", To: "n4"}},
			Loads: []backend.NodeLoad{{Node: "n1", ReplicasBefore: 4, ReplicasAfter: 3, LeadsBefore: 2, LeadsAfter: 2}, {Node: "n2", Draining: true}}},
	}
	srv := httptest.NewServer(server.New(server.Options{Backend: b}).Handler())
	defer srv.Close()
	rpc := logdv1connect.NewLogServiceClient(srv.Client(), srv.URL)

	resp, err := rpc.ListMoves(t.Context(), connect.NewRequest(&logdv1.ListMovesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Msg.NodeId != "n1" || len(resp.Msg.Moves) != 1 {
		t.Fatalf("ListMoves = %v", resp.Msg)
	}
	m := resp.Msg.Moves[0]
	if m.Group != 3 || !slices.Equal(m.Replicas, []string{"n1", "n3", "n4"}) || !slices.Equal(m.Added, []string{"n4"}) || !slices.Equal(m.Removed, []string{"n2"}) ||
		m.Reason != "node n2 drained" || m.SinceMs != since.UnixMilli() || m.AgeMs != 12_000 ||
		!slices.Equal(m.Voters, []string{"n1", "n2", "n3", "n4"}) || m.VotersFrom != "n3" || !m.VotersFromLeader || m.VotersError != "" ||
		!slices.Equal(m.AddedVoters, []string{"n4"}) || !slices.Equal(m.RemovedVoters, []string{"n2"}) {
		t.Errorf("move %v", m)
	}

	pr, err := rpc.PlanBalance(t.Context(), connect.NewRequest(&logdv1.PlanBalanceRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	p := pr.Msg
	if p.NodeId != "n1" || p.Groups != 4 || p.ReplicationFactor != 3 || !slices.Equal(p.Nodes, []string{"n1", "n4"}) || p.InProgress != 1 || !p.Truncated ||
		len(p.Steps) != 1 || p.Steps[0].Step != 1 || p.Steps[0].Kind != "replica" || p.Steps[0].Group != 2 || p.Steps[0].From != "n1" || p.Steps[0].To != "n4" ||
		len(p.Loads) != 2 || p.Loads[0].ReplicasBefore != 4 || p.Loads[0].ReplicasAfter != 3 || p.Loads[0].LeadsBefore != 2 || !p.Loads[1].Draining {
		t.Errorf("PlanBalance = %v", p)
	}
}
