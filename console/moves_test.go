package console_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/logdtest"
	"github.com/logd-dev/logd/server"
)

// tpMovesBackend is a follower whose table places data groups, some of
// them moving: Status as tpRaftBackend with the groups, ListMoves with
// the moves.
type tpMovesBackend struct {
	tpRaftBackend
	moves []backend.MoveState
}

func (b *tpMovesBackend) Status() backend.Status {
	st := b.tpRaftBackend.Status()
	st.DataGroups = []backend.DataGroupStatus{
		{ID: 3, Replicas: []string{"n1", "n3", "n4"}}, {ID: 9, Replicas: []string{"n1", "n3", "n4"}}, {ID: 12, Replicas: []string{"n3", "n4", "n1"}},
	}
	return st
}

func (b *tpMovesBackend) ListMoves(context.Context) ([]backend.MoveState, error) { return b.moves, nil }

// TestClusterPageShowsMoves: with data groups, the cluster page lists the
// replica moves in progress, each with what it adds and removes, why,
// its age, the group's voters and where it stands (adding, removing,
// done, or unknown when no replica answered); none says so; without data
// groups there is no such section.
func TestClusterPageShowsMoves(t *testing.T) {
	since := time.Now().Add(-12 * time.Second)
	b := &tpMovesBackend{tpRaftBackend: tpRaftBackend{id: "n2", leader: "n1", disk: backend.DiskUsage{Total: 100 << 30, Avail: 60 << 30}},
		moves: []backend.MoveState{
			{Group: 3, Replicas: []string{"n1", "n3", "n4"}, Age: 12 * time.Second,
				Move:   backend.ReplicaMove{Added: []string{"n4"}, Removed: []string{"n2"}, Reason: "node n2 drained", Since: since},
				Voters: []string{"n1", "n2", "n3"}, VotersFrom: "n1", VotersFromLeader: true},
			{Group: 9, Replicas: []string{"n1", "n3", "n4"}, Age: 95 * time.Second,
				Move:   backend.ReplicaMove{Added: []string{"n4"}, Reason: "balance", Since: since},
				Voters: []string{"n1", "n3", "n4"}, VotersFrom: "n3"},
			{Group: 12, Replicas: []string{"n3", "n4", "n1"}, Age: time.Second,
				Move:        backend.ReplicaMove{Removed: []string{"n5"}, Reason: "node n5 not heard from", Since: since},
				VotersError: "no replica of data group 12 answered within 2s"},
		}}
	srv := httptest.NewServer(server.New(server.Options{Backend: b}).Handler())
	t.Cleanup(srv.Close)
	p := newPageAt(t, srv.URL)
	p.open("/cluster")
	p.waitText("#cluster-moves h2", "Replica moves")
	p.waitText(`#cluster-moves tr[data-group="3"]`, "adding n4; removing n2")
	for sel, want := range map[string][]string{
		`#cluster-moves tr[data-group="3"]`:  {"n4", "n2", "node n2 drained", "12.0s", "n1, n2, n3"},
		`#cluster-moves tr[data-group="9"]`:  {"balance", "1m35s", "done"},
		`#cluster-moves tr[data-group="12"]`: {"n5", "node n5 not heard from", "unknown: no replica of data group 12 answered within 2s"},
	} {
		for _, w := range want {
			p.waitText(sel, w)
		}
	}
	if n := p.count("#cluster-moves tbody tr"); n != 3 {
		t.Errorf("%d move rows, want 3", n)
	}
	p.waitText("#cluster-moves", "As n2 knows them.")

	node := logdtest.Start(t, logdtest.Options{DataGroupsPerNode: 2})
	q := newPage(t, node)
	q.open("/cluster")
	q.waitText("#cluster-moves", "No replica moves in progress.")

	plain := logdtest.Start(t, logdtest.Options{})
	r := newPage(t, plain)
	r.open("/cluster")
	r.waitText("#cluster-members", "leader")
	if n := r.count("#cluster-moves h2"); n != 0 {
		t.Errorf("a node without data groups shows a replica-moves section")
	}
}
