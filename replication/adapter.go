package replication

import (
	"fmt"
	"io"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/replication/fsm"
)

// raftFSM adapts the state machine to hashicorp/raft: Raft's entries become
// fsm.Entry values, its snapshot sink the io.Writer the snapshot is written
// to. Raft calls ApplyBatch, Snapshot and Restore on its FSM goroutine.
type raftFSM struct {
	f *fsm.FSM
	// entries is reused by ApplyBatch (Raft's FSM goroutine only).
	entries []fsm.Entry
}

var (
	_ raft.BatchingFSM = (*raftFSM)(nil)
	_ raft.FSMSnapshot = (*raftSnapshot)(nil)
)

// Apply applies one committed Raft entry.
func (a *raftFSM) Apply(l *raft.Log) any {
	return a.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies entries committed together in one call.
func (a *raftFSM) ApplyBatch(logs []*raft.Log) []any {
	es := a.entries[:0]
	for _, l := range logs {
		es = append(es, fsm.Entry{Index: l.Index, Command: l.Type == raft.LogCommand, Data: l.Data})
	}
	out := a.f.ApplyBatch(es)
	clear(es) // drop the entries' data
	a.entries = es[:0]
	return out
}

// Snapshot captures the state between applies.
func (a *raftFSM) Snapshot() (raft.FSMSnapshot, error) {
	s, err := a.f.Snapshot()
	if err != nil {
		return nil, err
	}
	return &raftSnapshot{s: s}, nil
}

// Restore replaces the state with a snapshot's.
func (a *raftFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	return a.f.Restore(rc)
}

// raftSnapshot writes an fsm.Snapshot to a Raft snapshot sink.
type raftSnapshot struct{ s *fsm.Snapshot }

// Persist writes the snapshot; once the sink is closed (durable), the
// state machine may drop what only older snapshots needed.
func (r *raftSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := r.s.Persist(sink); err != nil {
		sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return err
	}
	r.s.Durable()
	return nil
}

// Release releases what the snapshot holds.
func (r *raftSnapshot) Release() { r.s.Release() }
