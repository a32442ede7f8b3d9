package raftstore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	waltypes "github.com/hashicorp/raft-wal/types"
	"go.etcd.io/bbolt"

	"github.com/logd-dev/logd/internal/slogbridge"
)

// Options configure the stores Open opens for one Raft group. The zero
// value of each optional field has the documented default.
type Options struct {
	// Dir is the group's Raft directory: raft.db (the stable store, and
	// the log with LogStoreBoltDB), wal/ (the log with LogStoreWAL) and
	// snapshots/. Created if missing. Required unless InMemory; each
	// group of a process has its own.
	Dir string
	// InMemory keeps the log, stable and snapshot stores in memory
	// (hashicorp/raft's InmemStore and InmemSnapshotStore), for tests;
	// Dir, LogStore and WrapWALFS are then ignored.
	InMemory bool
	// LogStore is where Raft's log is kept: LogStoreBoltDB or
	// LogStoreWAL. Empty: the store Dir's Raft log is in, else
	// DefaultLogStore. A Dir whose log is in the other store is refused
	// (ErrLogStoreMismatch).
	LogStore string
	// WALSegmentBytes is the size of one raft-wal segment file, from
	// MinWALSegmentBytes to MaxWALSegmentBytes; 0: DefaultWALSegmentBytes.
	// A changed size applies to the segments created from then on.
	WALSegmentBytes int
	// WrapWALFS, if set, wraps the file system raft-wal writes its
	// segment files through: fault builds of cmd/logd model a power cut
	// there (internal/faults).
	WrapWALFS func(waltypes.VFS) waltypes.VFS
	// Logger receives the log store's choice and bbolt's lines; default
	// slog.Default().
	Logger *slog.Logger
	// RaftLogger receives the lines of raft-wal and of the snapshot
	// store; default Logger's handler at warn level, named "raft"
	// (internal/slogbridge).
	RaftLogger hclog.Logger
}

// Validate checks Dir, LogStore and WALSegmentBytes; its errors are
// ErrInvalidOptions.
func (o Options) Validate() error {
	switch {
	case o.Dir == "" && !o.InMemory:
		return fmt.Errorf("%w: raft dir is required", ErrInvalidOptions)
	case o.WALSegmentBytes != 0 && (o.WALSegmentBytes < MinWALSegmentBytes || o.WALSegmentBytes > MaxWALSegmentBytes):
		return fmt.Errorf("%w: raft wal segment size %d: want %d to %d bytes", ErrInvalidOptions, o.WALSegmentBytes, MinWALSegmentBytes, MaxWALSegmentBytes)
	case !validLogStore(o.LogStore):
		return fmt.Errorf("%w: raft log store %q: want %s or %s", ErrInvalidOptions, o.LogStore, LogStoreBoltDB, LogStoreWAL)
	}
	return nil
}

// withDefaults returns o with its loggers set.
func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.RaftLogger == nil {
		o.RaftLogger = slogbridge.HCLog(o.Logger.Handler(), "raft", hclog.Warn)
	}
	return o
}

// Stores are the log, stable and snapshot stores of one Raft group, as
// hashicorp/raft takes them. Open sets the fields; they do not change
// after, and Close releases what they hold.
type Stores struct {
	// Logs is Raft's log: raft-boltdb's store (the same value as Stable)
	// or a raft-wal WAL, on disk; a raft.InmemStore in memory.
	Logs raft.LogStore
	// Stable holds Raft's current term and vote: raft-boltdb's raft.db.
	Stable raft.StableStore
	// Snapshots are Raft's snapshots, the latest two kept on disk.
	Snapshots raft.SnapshotStore

	// close releases the log store (unless it is the stable store), then
	// the stable store; nil in memory.
	close func() error
}

// Open opens (or creates) the stores of opts. It starts no goroutine of
// its own (raft-wal runs its rotation in one until Close). Close them
// with Close, after Raft has shut down.
func Open(opts Options) (*Stores, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if opts.InMemory {
		s := raft.NewInmemStore()
		return &Stores{Logs: s, Stable: s, Snapshots: raft.NewInmemSnapshotStore()}, nil
	}
	return openDisk(opts)
}

// openDisk opens the Raft stable store (bbolt), the log store (the same
// bbolt file or a WAL, logstore.go) and the snapshot store under o.Dir.
func openDisk(o Options) (*Stores, error) {
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create raft dir: %w", err)
	}
	bolt, err := raftboltdb.New(raftboltdb.Options{
		Path: filepath.Join(o.Dir, "raft.db"),
		// The raft log churns: entries are written once and deleted after
		// the next snapshot. A hashmap freelist that is rebuilt on open
		// instead of written on every commit keeps each commit's write small.
		BoltOptions: &bbolt.Options{Timeout: 5 * time.Second, FreelistType: bbolt.FreelistMapType, NoFreelistSync: true,
			Logger: slogbridge.Bbolt(o.Logger.With("logger", "bbolt"))},
	})
	if err != nil {
		return nil, fmt.Errorf("open raft stable store: %w", err)
	}
	logs, err := openLogStore(o, bolt)
	if err != nil {
		bolt.Close()
		return nil, err
	}
	closeStores := bolt.Close
	if c, ok := logs.(io.Closer); ok && logs != raft.LogStore(bolt) {
		closeStores = func() error { return errors.Join(c.Close(), bolt.Close()) }
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(o.Dir, 2, o.RaftLogger)
	if err != nil {
		closeStores()
		return nil, fmt.Errorf("open snapshot store: %w", err)
	}
	return &Stores{Logs: logs, Stable: bolt, Snapshots: snaps, close: closeStores}, nil
}

// Close releases the stores: the log store, then the stable store. Raft
// must have shut down.
func (s *Stores) Close() error {
	if s.close == nil {
		return nil
	}
	return s.close()
}
