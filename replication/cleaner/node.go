package cleaner

import (
	"context"
	"log/slog"
	"time"

	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/replication/fsm"
)

// Node is what the cleaner needs of the node it runs on. Its methods may
// be called from any goroutine.
type Node interface {
	// IsLeader reports whether this node is the Raft leader: only the
	// leader plans and proposes.
	IsLeader() bool
	// Propose proposes an encoded command (fsm.EncodeJSON of fsm.CmdTrim
	// or fsm.CmdCompact, stamped by the cleaner) and waits until it is
	// committed and applied. Errors: a proposal's (backend.ErrNotLeader,
	// backend.ErrTimeout when the outcome is unknown, backend.ErrStopped,
	// backend.ErrShutdown) and the command's refusal.
	Propose(ctx context.Context, cmd []byte) error
}

// State is the applied state the cleaner plans from, as this node applied
// it; *fsm.FSM implements it.
type State interface {
	// Topics returns every topic, sorted by name.
	Topics() []*fsm.Topic
	// ProtectedFrom is the lowest offset of a partition that retention
	// and compaction must keep (what a queue group has not finished).
	ProtectedFrom(t *fsm.Topic, partition int32) int64
	// RecordCodec is the codec a compaction reads batches with, at the
	// applied feature level.
	RecordCodec() fsm.RecordCodec
	// OfferCompaction hands a compaction prepared on a partition to the
	// apply of the Compact command about to be proposed; withdraw
	// discards it if the apply has not taken it.
	OfferCompaction(t *fsm.Topic, partition int32, below, horizon int64, c *log.Compaction) (withdraw func())
	// RetiredSegments is signalled when applied trims or compactions
	// retired segment files; ReleaseRetired closes them.
	RetiredSegments() <-chan struct{}
	ReleaseRetired() error
}

// Options configures a Cleaner. The zero value of each field has the
// documented default.
type Options struct {
	// Interval is how often the leader runs a pass; DefaultInterval when
	// zero or negative.
	Interval time.Duration
	// IOBytesPerSec bounds the I/O (reads plus writes, bytes per second)
	// of a compaction's preparation; 0 is DefaultIOBytesPerSec, negative
	// unbounded.
	IOBytesPerSec int64
	// Now is the leader's clock: retention plans with it and commands are
	// stamped with it; default time.Now.
	Now func() time.Time
	// Logger receives the cleaner's warnings; default slog.Default().
	Logger *slog.Logger
}

// Cleaner is the retention and compaction scheduler of one node. New
// starts nothing; Run is its loop, until its context ends. Its methods
// may be called from any goroutine.
type Cleaner struct {
	node          Node
	state         State
	interval      time.Duration
	ioBytesPerSec int64 // 0: unbounded
	now           func() time.Time
	log           *slog.Logger
	stats         stats
}

// New returns the cleaner of node; state is node's applied state.
func New(node Node, state State, opts Options) *Cleaner {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Cleaner{node: node, state: state, interval: opts.Interval, ioBytesPerSec: ioBytesPerSec(opts.IOBytesPerSec),
		now: opts.Now, log: opts.Logger}
}
