package replication

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/replication/fsm"
)

// TestEffectiveAppliedIsTheStateMachines: what a replica's status reports
// as applied is what its state machine holds, not Raft's applied index,
// which counts an entry once Raft handed it to the state machine's
// goroutine. A data group replica's status reported Raft's: under load a
// follower's state machine trailed it, a converged cluster (every replica
// at one applied index) still read without a follower's last write, and
// the failpoint test saw an acknowledged record missing there
// (docs/architecture.md, "Data groups").
func TestEffectiveAppliedIsTheStateMachines(t *testing.T) {
	f := fsm.New(fsm.Config{Dir: t.TempDir()})
	defer f.Close()
	// Entries 1 and 2 (Raft's own) applied; 3 a command not applied yet,
	// 4 a no-op, 5 a barrier.
	f.ApplyBatch([]fsm.Entry{{Index: 1}, {Index: 2}})
	logs := raft.NewInmemStore()
	if err := logs.StoreLogs([]*raft.Log{
		{Index: 1, Type: raft.LogNoop}, {Index: 2, Type: raft.LogNoop},
		{Index: 3, Type: raft.LogCommand}, {Index: 4, Type: raft.LogNoop}, {Index: 5, Type: raft.LogBarrier},
	}); err != nil {
		t.Fatal(err)
	}
	if got := effectiveApplied(f, logs, 5); got != 2 {
		t.Errorf("with command 3 not applied, commit 5: applied %d, want 2 (the state machine's)", got)
	}
	f.ApplyBatch([]fsm.Entry{{Index: 3}})
	if got := effectiveApplied(f, logs, 5); got != 5 {
		t.Errorf("with every command through the commit index applied: applied %d, want 5", got)
	}
}
