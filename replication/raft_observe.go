package replication

import (
	"io"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/logd-dev/logd/backend"
)

// Raft's own measurements, per node. hashicorp/raft reports its timings
// through armon/go-metrics' process-wide sink, which would mix the nodes of
// one test process and hold what it gathers in memory; logd measures what
// an operator needs itself, at the seams it already owns: the FSM adapter
// (apply, snapshot persist), a wrapper of the Raft log store (its writes,
// each a bbolt commit with fsync), a wrapper of the transport (each
// follower's answers to the leader's AppendEntries, heartbeats included)
// and a Raft observer (leader changes). The front end renders them
// (server/raft_metrics.go); docs/operations.md lists them.

// timing gathers backend.Timings; safe for concurrent use.
type timing struct {
	mu sync.Mutex
	// count, sum and buckets (not cumulative) are guarded by mu.
	count   uint64
	sum     time.Duration
	buckets [18]uint64
}

// observe records one duration.
func (t *timing) observe(d time.Duration) {
	i := 0
	for bound := 100 * time.Microsecond; i < len(t.buckets)-1 && d > bound; bound <<= 1 {
		i++
	}
	t.mu.Lock()
	t.count++
	t.sum += d
	if d <= 100*time.Microsecond<<(len(t.buckets)-1) {
		t.buckets[i]++
	}
	t.mu.Unlock()
}

// get returns the histogram so far, with cumulative buckets.
func (t *timing) get() backend.Timings {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := backend.Timings{Count: t.count, Sum: t.sum, Buckets: make([]uint64, len(t.buckets))}
	var c uint64
	for i, n := range t.buckets {
		c += n
		out.Buckets[i] = c
	}
	return out
}

// raftObserver holds a node's backend.RaftMetrics as they are gathered.
type raftObserver struct {
	apply, storeLogs, persist timing

	mu sync.Mutex
	// snapshotBytes, leaderChanges and followers (by node id) are guarded
	// by mu. followers is filled by the transport wrapper on the leader;
	// entries of peers no longer members are left out by backend.RaftMetrics and
	// dropped when leadership is lost, so it stays bounded by the
	// configuration.
	snapshotBytes uint64
	leaderChanges uint64
	followers     map[raft.ServerID]backend.FollowerStats
}

func newRaftObserver() *raftObserver {
	return &raftObserver{followers: make(map[raft.ServerID]backend.FollowerStats)}
}

// heard records a follower's answer to an AppendEntries.
func (o *raftObserver) heard(id raft.ServerID, lastIndex uint64, at time.Time) {
	o.mu.Lock()
	o.followers[id] = backend.FollowerStats{ID: string(id), LastContact: at, LastIndex: lastIndex}
	o.mu.Unlock()
}

// leaderObserved counts a leader change seen by Raft's observer (a
// LeaderObservation naming a leader) and forgets the followers when this
// node is not the new leader.
func (o *raftObserver) leaderObserved(leader raft.ServerID, self raft.ServerID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if leader == "" {
		clear(o.followers)
		return
	}
	o.leaderChanges++
	if leader != self {
		clear(o.followers)
	}
}

// RaftMetrics returns the node's Raft measurements.
func (n *Node) RaftMetrics() backend.RaftMetrics {
	o := n.observer
	m := backend.RaftMetrics{Apply: o.apply.get(), StoreLogs: o.storeLogs.get(), SnapshotPersist: o.persist.get(), LastIndex: n.raft.LastIndex()}
	var members []raft.Server
	leads := n.raft.State() == raft.Leader
	if f := n.raft.GetConfiguration(); leads && f.Error() == nil {
		members = f.Configuration().Servers
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	m.SnapshotBytes, m.LeaderChanges = o.snapshotBytes, o.leaderChanges
	for _, s := range members {
		if string(s.ID) == n.cfg.NodeID {
			continue
		}
		f, ok := o.followers[s.ID]
		if !ok {
			f = backend.FollowerStats{ID: string(s.ID)}
		}
		m.Followers = append(m.Followers, f)
	}
	slices.SortFunc(m.Followers, func(a, b backend.FollowerStats) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return m
}

// observedTransport times nothing itself: it notes each follower's answer
// to the leader's AppendEntries calls that do not go through a pipeline
// (heartbeats, and replication while a follower catches up), which carry
// the follower's last log index. Pipelined batches are left alone: the
// heartbeats alone refresh every follower many times per heartbeat
// timeout. Of the requests it receives, it notes the leader's commit
// index (leader_commit.go).
type observedTransport struct {
	raft.Transport
	o       *raftObserver
	commits *leaderCommits
	// rpcs is Consumer's channel, fed by forward.
	rpcs chan raft.RPC
}

// observeTransport wraps t, keeping the optional interfaces hashicorp/raft
// looks for (pre-vote, close); it returns the transport to give Raft and
// the wrapper, whose forward the node runs (leader_commit.go).
func observeTransport(t raft.Transport, o *raftObserver, c *leaderCommits) (raft.Transport, *observedTransport) {
	base := &observedTransport{Transport: t, o: o, commits: c, rpcs: make(chan raft.RPC)}
	if pv, ok := t.(raft.WithPreVote); ok {
		return &observedPreVoteTransport{observedTransport: base, pv: pv}, base
	}
	return base, base
}

// AppendEntries implements raft.Transport.
func (t *observedTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	err := t.Transport.AppendEntries(id, target, args, resp)
	if err == nil {
		t.o.heard(id, resp.LastLog, time.Now())
	}
	return err
}

// Close implements raft.WithClose when the wrapped transport does.
func (t *observedTransport) Close() error {
	if c, ok := t.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

// observedPreVoteTransport is an observedTransport over a transport with
// pre-vote.
type observedPreVoteTransport struct {
	*observedTransport
	pv raft.WithPreVote
}

// RequestPreVote implements raft.WithPreVote.
func (t *observedPreVoteTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.pv.RequestPreVote(id, target, args, resp)
}

// timedLogStore times the Raft log store's writes.
type timedLogStore struct {
	raft.LogStore
	t *timing
}

// timeLogStore wraps s, keeping raft.MonotonicLogStore if s has it.
func timeLogStore(s raft.LogStore, t *timing) raft.LogStore {
	base := &timedLogStore{LogStore: s, t: t}
	if m, ok := s.(raft.MonotonicLogStore); ok {
		return &timedMonotonicLogStore{timedLogStore: base, m: m}
	}
	return base
}

// StoreLog implements raft.LogStore.
func (s *timedLogStore) StoreLog(l *raft.Log) error {
	start := time.Now()
	err := s.LogStore.StoreLog(l)
	s.t.observe(time.Since(start))
	return err
}

// StoreLogs implements raft.LogStore.
func (s *timedLogStore) StoreLogs(logs []*raft.Log) error {
	start := time.Now()
	err := s.LogStore.StoreLogs(logs)
	s.t.observe(time.Since(start))
	return err
}

// timedMonotonicLogStore is a timedLogStore over a monotonic store.
type timedMonotonicLogStore struct {
	*timedLogStore
	m raft.MonotonicLogStore
}

// IsMonotonic implements raft.MonotonicLogStore.
func (s *timedMonotonicLogStore) IsMonotonic() bool { return s.m.IsMonotonic() }

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
