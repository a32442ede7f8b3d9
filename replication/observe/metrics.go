package observe

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
)

// Raft's own measurements, per Raft group. hashicorp/raft reports its timings
// through armon/go-metrics' process-wide sink, which would mix the nodes of
// one test process and hold what it gathers in memory; logd measures what
// an operator needs itself, at the seams it already owns: the FSM adapter
// (apply, snapshot persist), a wrapper of the Raft log store (its writes,
// each a bbolt commit with fsync), a wrapper of the transport (each
// follower's answers to the leader's AppendEntries, heartbeats included)
// and a Raft observer (leader changes). The front end renders them
// (server/raft_metrics.go); docs/operations.md lists them.

// Timing gathers backend.Timings; safe for concurrent use. The zero value
// is ready.
type Timing struct {
	mu sync.Mutex
	// count, sum and buckets (not cumulative) are guarded by mu.
	count   uint64
	sum     time.Duration
	buckets [18]uint64
}

// Observe records one duration.
func (t *Timing) Observe(d time.Duration) {
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

// Get returns the histogram so far, with cumulative buckets.
func (t *Timing) Get() backend.Timings {
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

// Metrics holds a Raft group's backend.RaftMetrics as they are gathered:
// the timings its owner observes (Apply, StoreLogs through TimeLogStore,
// SnapshotPersist), what the transport wrapper hears from followers, and
// the leader changes and snapshot sizes its owner reports. Safe for
// concurrent use; make one with NewMetrics.
type Metrics struct {
	Apply, StoreLogs, SnapshotPersist Timing

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

// NewMetrics returns empty metrics.
func NewMetrics() *Metrics {
	return &Metrics{followers: make(map[raft.ServerID]backend.FollowerStats)}
}

// SnapshotPersisted records the size of the snapshot just persisted.
func (o *Metrics) SnapshotPersisted(bytes uint64) {
	o.mu.Lock()
	o.snapshotBytes = bytes
	o.mu.Unlock()
}

// heard records a follower's answer to an AppendEntries.
func (o *Metrics) heard(id raft.ServerID, lastIndex uint64, at time.Time) {
	o.mu.Lock()
	o.followers[id] = backend.FollowerStats{ID: string(id), LastContact: at, LastIndex: lastIndex}
	o.mu.Unlock()
}

// LeaderObserved counts a leader change seen by Raft's observer (a
// LeaderObservation naming a leader) and forgets the followers when self
// is not the new leader.
func (o *Metrics) LeaderObserved(leader raft.ServerID, self raft.ServerID) {
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

// Get returns the measurements so far. lastIndex is the group's last log
// index; members, the voters and non-voters of the configuration when
// self leads (none otherwise), are the followers listed, self left out,
// sorted by id: a follower not heard from yet is listed with no contact.
func (o *Metrics) Get(self string, members []raft.Server, lastIndex uint64) backend.RaftMetrics {
	m := backend.RaftMetrics{Apply: o.Apply.Get(), StoreLogs: o.StoreLogs.Get(), SnapshotPersist: o.SnapshotPersist.Get(), LastIndex: lastIndex}
	o.mu.Lock()
	defer o.mu.Unlock()
	m.SnapshotBytes, m.LeaderChanges = o.snapshotBytes, o.leaderChanges
	for _, s := range members {
		if string(s.ID) == self {
			continue
		}
		f, ok := o.followers[s.ID]
		if !ok {
			f = backend.FollowerStats{ID: string(s.ID)}
		}
		m.Followers = append(m.Followers, f)
	}
	slices.SortFunc(m.Followers, func(a, b backend.FollowerStats) int { return strings.Compare(a.ID, b.ID) })
	return m
}

// Transport times nothing itself: it notes each follower's answer
// to the leader's AppendEntries calls that do not go through a pipeline
// (heartbeats, and replication while a follower catches up), which carry
// the follower's last log index. Pipelined batches are left alone: the
// heartbeats alone refresh every follower many times per heartbeat
// timeout. Of the requests it receives, it notes the leader's commit
// index (LeaderCommits).
type Transport struct {
	raft.Transport
	o       *Metrics
	commits *LeaderCommits
	// rpcs is Consumer's channel, fed by Forward and by the heartbeats
	// kept off Raft's fast path (heartbeat.go).
	rpcs chan raft.RPC
	// stop is closed once Raft has shut down (Forward's stop).
	stop <-chan struct{}
	// term returns the node's current term; nil until SetTerm.
	term atomic.Pointer[func() uint64]
	// awaitPeer waits for a peer that refused a connection; nil until
	// SetAwaitPeer.
	awaitPeer atomic.Pointer[func(raft.ServerAddress) bool]
}

// WrapTransport wraps t, keeping the optional interfaces hashicorp/raft
// looks for (pre-vote, close); it returns the transport to give Raft and
// the wrapper, whose Forward its owner runs until Raft is shut down, with
// stop, closed then. Its owner calls SetTerm once Raft is made.
func WrapTransport(t raft.Transport, o *Metrics, c *LeaderCommits, stop <-chan struct{}) (raft.Transport, *Transport) {
	base := &Transport{Transport: t, o: o, commits: c, rpcs: make(chan raft.RPC), stop: stop}
	if pv, ok := t.(raft.WithPreVote); ok {
		return &preVoteTransport{Transport: base, pv: pv}, base
	}
	return base, base
}

// SetAwaitPeer sets how AppendEntries waits for a follower whose node
// refused the connection (its process is down) before it answers the
// failure: await returns once the node takes connections again, or
// after its own bound.
func (t *Transport) SetAwaitPeer(await func(raft.ServerAddress) bool) { t.awaitPeer.Store(&await) }

// AppendEntries implements raft.Transport.
//
// A call refused because the follower's node is down fails only once
// the node is back, or the wait set by SetAwaitPeer ended. hashicorp/raft
// backs off a follower's replication after each failed call, doubling
// from 10 ms up to about 10 s, and only a successful AppendEntries resets
// it (a heartbeat's success does not): with every refusal failing at
// once, a node down for ten seconds got its first entries up to 10 s
// after it came back, in each group it holds. Waiting counts a failure
// per wait, and Raft retries at once with a new request. The request
// itself is never held and sent later: its commit index would be older
// than the restarted replica, which takes the first one it hears for the
// leader's (replication's followerCaughtUp).
func (t *Transport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	err := t.Transport.AppendEntries(id, target, args, resp)
	if err == nil {
		t.o.heard(id, resp.LastLog, time.Now())
	} else if await := t.awaitPeer.Load(); await != nil && errors.Is(err, syscall.ECONNREFUSED) {
		(*await)(target)
	}
	return err
}

// Close implements raft.WithClose when the wrapped transport does.
func (t *Transport) Close() error {
	if c, ok := t.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

// preVoteTransport is a Transport over a transport with pre-vote.
type preVoteTransport struct {
	*Transport
	pv raft.WithPreVote
}

// RequestPreVote implements raft.WithPreVote.
func (t *preVoteTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.pv.RequestPreVote(id, target, args, resp)
}

// timedLogStore times the Raft log store's writes.
type timedLogStore struct {
	raft.LogStore
	t *Timing
}

// TimeLogStore wraps s so that its writes are timed into t, keeping
// raft.MonotonicLogStore if s has it.
func TimeLogStore(s raft.LogStore, t *Timing) raft.LogStore {
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
	s.t.Observe(time.Since(start))
	return err
}

// StoreLogs implements raft.LogStore.
func (s *timedLogStore) StoreLogs(logs []*raft.Log) error {
	start := time.Now()
	err := s.LogStore.StoreLogs(logs)
	s.t.Observe(time.Since(start))
	return err
}

// timedMonotonicLogStore is a timedLogStore over a monotonic store.
type timedMonotonicLogStore struct {
	*timedLogStore
	m raft.MonotonicLogStore
}

// IsMonotonic implements raft.MonotonicLogStore.
func (s *timedMonotonicLogStore) IsMonotonic() bool { return s.m.IsMonotonic() }
