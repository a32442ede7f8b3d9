package replication

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/observe"
)

// raftFSM adapts the state machine to hashicorp/raft: Raft's entries become
// fsm.Entry values, its snapshot sink the io.Writer the snapshot is written
// to. Raft calls ApplyBatch, Snapshot and Restore on its FSM goroutine.
type raftFSM struct {
	f *fsm.FSM
	// applied is fired after every applied batch and restored snapshot.
	applied *appliedSignal
	// entries is reused by ApplyBatch (Raft's FSM goroutine only).
	entries []fsm.Entry
	// obs times applies and snapshot persists (package replication/observe).
	obs *observe.Metrics
	// dataGroup is set for a data group's replica: its timings go to
	// the node's metrics, which are the meta group's (obs), and the
	// snapshot size stays the meta group's.
	dataGroup bool
	// logger receives a line per snapshot, so stalls seen by clients can
	// be lined up with snapshots (docs/performance.md).
	logger *slog.Logger
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
	start := time.Now()
	defer func() {
		took := time.Since(start)
		a.obs.Apply.Observe(took)
		if took >= slowApply {
			a.logger.Warn("slow apply", "entries", len(logs), "first_index", logs[0].Index, "took", took)
		}
	}()
	es := a.entries[:0]
	for _, l := range logs {
		es = append(es, fsm.Entry{Index: l.Index, Command: l.Type == raft.LogCommand, Data: l.Data})
	}
	out := a.f.ApplyBatch(es)
	clear(es) // drop the entries' data
	a.entries = es[:0]
	a.applied.fire()
	return out
}

// Snapshot captures the state between applies.
func (a *raftFSM) Snapshot() (raft.FSMSnapshot, error) {
	start := time.Now()
	s, err := a.f.Snapshot()
	if err != nil {
		return nil, err
	}
	return &raftSnapshot{s: s, obs: a.obs, dataGroup: a.dataGroup, logger: a.logger, captured: start, capture: time.Since(start)}, nil
}

// Restore replaces the state with a snapshot's.
func (a *raftFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	defer a.applied.fire()
	start := time.Now()
	err := a.f.Restore(rc)
	if err != nil {
		a.logger.Warn("snapshot restore failed", "took", time.Since(start), "err", err)
	}
	return err
}

// slowApply is how long an applied batch may take before it is logged: the
// state machine applies nothing else meanwhile, so every write and every
// follower read waiting for it stalls that long.
const slowApply = time.Second

// appliedSignal wakes readers waiting for this node to apply more of the
// log: a follower serving a group member that learnt its generation from
// the leader waits for it (AwaitGroupFetch). It costs one lock per applied
// batch while nobody waits.
type appliedSignal struct {
	mu sync.Mutex
	// ch is closed and dropped by fire; nil while nobody waits. Guarded
	// by mu.
	ch chan struct{}
}

// wait returns a channel closed once the next batch is applied (or a
// snapshot restored). Take it before reading the state it is about, so an
// apply in between is not missed.
func (s *appliedSignal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// fire wakes the waiters; a nil signal does nothing.
func (s *appliedSignal) fire() {
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	s.mu.Unlock()
}

// raftSnapshot writes an fsm.Snapshot to a Raft snapshot sink.
type raftSnapshot struct {
	s   *fsm.Snapshot
	obs *observe.Metrics
	// dataGroup: see raftFSM.dataGroup.
	dataGroup bool
	logger    *slog.Logger
	// captured is when the FSM goroutine began the capture, capture how
	// long it held that goroutine.
	captured time.Time
	capture  time.Duration
}

// Persist writes the snapshot; once the sink is closed (durable), the
// state machine may drop what only older snapshots needed.
func (r *raftSnapshot) Persist(sink raft.SnapshotSink) error {
	start := time.Now()
	w := &countingWriter{w: sink}
	if err := r.s.Persist(w); err != nil {
		sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return err
	}
	r.s.Durable()
	persist := time.Since(start)
	r.obs.SnapshotPersist.Observe(persist)
	if r.logger != nil {
		r.logger.Info("snapshot persisted", "index", r.s.Index(), "bytes", w.n, "capture", r.capture, "persist", persist,
			"started", r.captured.UTC().Format("15:04:05.000"))
	}
	if !r.dataGroup {
		r.obs.SnapshotPersisted(w.n)
	}
	return nil
}

// Release releases what the snapshot holds.
func (r *raftSnapshot) Release() { r.s.Release() }

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n uint64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += uint64(n)
	return n, err
}
