package cleaner

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/replication/fsm"
)

// The cleaner against a real node (retention at its exact boundary,
// compaction, the dirty ratio, catch-up after a compaction) is tested in
// package replication (cleaner_test.go, cleaner_ratio_test.go,
// catchup_stale_test.go); these tests cover what the package decides
// alone.

func TestOptionsDefaults(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     Options
		interval time.Duration
		io       int64
	}{
		{name: "zero", interval: DefaultInterval, io: DefaultIOBytesPerSec},
		{name: "negative interval", opts: Options{Interval: -time.Second}, interval: DefaultInterval, io: DefaultIOBytesPerSec},
		{name: "set", opts: Options{Interval: time.Minute, IOBytesPerSec: 1 << 20}, interval: time.Minute, io: 1 << 20},
		{name: "unbounded I/O", opts: Options{IOBytesPerSec: -1}, interval: DefaultInterval, io: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(&node{}, &state{}, tc.opts)
			if c.interval != tc.interval || c.ioBytesPerSec != tc.io {
				t.Fatalf("interval %s, I/O %d; want %s, %d", c.interval, c.ioBytesPerSec, tc.interval, tc.io)
			}
		})
	}
}

// node leads while leads is set and refuses every proposal.
type node struct{ leads atomic.Bool }

func (n *node) IsLeader() bool { return n.leads.Load() }

func (n *node) Propose(ctx context.Context, cmd []byte) error { return backend.ErrNotLeader }

// state has no topics; retire signals retired segment files, released
// counts the calls that closed them.
type state struct {
	retire   chan struct{}
	released atomic.Int32
}

func (s *state) Topics() []*fsm.Topic                              { return nil }
func (s *state) ProtectedFrom(t *fsm.Topic, partition int32) int64 { return 0 }
func (s *state) RecordCodec() fsm.RecordCodec                      { return fsm.RecordCodec{} }
func (s *state) OfferCompaction(*fsm.Topic, int32, int64, int64, *log.Compaction) func() {
	return func() {}
}
func (s *state) RetiredSegments() <-chan struct{} { return s.retire }
func (s *state) ReleaseRetired() error {
	s.released.Add(1)
	return nil
}

// TestPassLeaderOnly: a pass on a node that does not lead is
// backend.ErrNotLeader and counts nothing; on the leader it counts a run.
func TestPassLeaderOnly(t *testing.T) {
	n := &node{}
	c := New(n, &state{}, Options{})
	if err := c.Pass(context.Background()); !errors.Is(err, backend.ErrNotLeader) {
		t.Fatalf("pass on a follower: %v, want backend.ErrNotLeader", err)
	}
	if st := c.Stats(); st.Runs != 0 {
		t.Fatalf("stats after a refused pass %+v", st)
	}
	n.leads.Store(true)
	if err := c.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Runs != 1 {
		t.Fatalf("stats after a pass %+v", st)
	}
}

// TestRunReleasesAndEnds: Run closes retired segment files on a node that
// does not lead too, and returns when its context ends (TestMain checks
// no goroutine is left).
func TestRunReleasesAndEnds(t *testing.T) {
	s := &state{retire: make(chan struct{})}
	c := New(&node{}, s, Options{Interval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	for range 2 {
		select {
		case s.retire <- struct{}{}:
		case <-time.After(10 * time.Second):
			t.Fatal("Run does not wait for retired segments")
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	// The second signal was received only after the first release.
	if got := s.released.Load(); got < 1 {
		t.Fatalf("%d releases, want at least 1", got)
	}
}
