package raftstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/segment"
	waltypes "github.com/hashicorp/raft-wal/types"
)

// Where Raft's log is kept on disk (Options.LogStore). raft-boltdb's
// file raft.db in Options.Dir is Raft's stable store (current term, vote)
// in either case; with LogStoreBoltDB it also holds the log, with
// LogStoreWAL the log is hashicorp/raft-wal's append-only segment files
// under Dir/wal (docs/operations.md, "Raft log store").
//
// A directory's log stays in the store it was written in: Open finds
// which one holds it (detectLogStore) and refuses a LogStore that names
// the other (ErrLogStoreMismatch); docs/operations.md says how to move a
// node from one to the other. Only a directory whose Raft log is empty (a
// new one, or one logd restore built) takes Options.LogStore, else
// DefaultLogStore.
const (
	// LogStoreBoltDB keeps Raft's log in raft-boltdb, beside the stable
	// store.
	LogStoreBoltDB = "boltdb"
	// LogStoreWAL keeps Raft's log in raft-wal's segment files.
	LogStoreWAL = "wal"
	// DefaultLogStore is the log store of a new directory when
	// Options.LogStore is empty. docs/performance.md ("Raft log store")
	// has the measurements it was chosen by.
	DefaultLogStore = LogStoreWAL
	// walDirName is the WAL's directory under Options.Dir.
	walDirName = "wal"
)

// validLogStore reports whether s is a log store name or empty.
func validLogStore(s string) bool {
	return s == "" || s == LogStoreBoltDB || s == LogStoreWAL
}

// detectLogStore says which store holds the Raft log of the directory
// raftDir, given its raft-boltdb file opened as bolt: LogStoreWAL if the
// WAL directory exists, LogStoreBoltDB if raft.db holds entries, "" if
// neither (a new data dir, or one restored from a backup, whose Raft
// state is a snapshot and a term). Both at once is an error: no run of
// logd writes both.
func detectLogStore(raftDir string, bolt *raftboltdb.BoltStore) (string, error) {
	last, err := bolt.LastIndex()
	if err != nil {
		return "", fmt.Errorf("read raft.db's last index: %w", err)
	}
	_, statErr := os.Stat(filepath.Join(raftDir, walDirName))
	if statErr != nil && !errors.Is(statErr, fs.ErrNotExist) {
		return "", fmt.Errorf("raft log store: %w", statErr)
	}
	hasWAL := statErr == nil
	switch {
	case hasWAL && last > 0:
		return "", fmt.Errorf("%w: %s holds Raft log entries (up to index %d) and a WAL directory too; move one aside (docs/operations.md, \"Raft log store\")",
			ErrLogStoreMismatch, raftDir, last)
	case hasWAL:
		return LogStoreWAL, nil
	case last > 0:
		return LogStoreBoltDB, nil
	}
	return "", nil
}

// chooseLogStore picks the log store of a directory whose Raft log is in
// detected ("" for none) when want was asked for ("" for no preference),
// and says why, for the log line at start.
func chooseLogStore(want, detected string) (store, reason string, err error) {
	switch {
	case detected != "" && want != "" && want != detected:
		return "", "", fmt.Errorf("%w: the data dir's Raft log is in %s, --raft-log-store asks for %s; start with --raft-log-store %s (or without it), or move the node as docs/operations.md (\"Raft log store\") says",
			ErrLogStoreMismatch, detected, want, detected)
	case detected != "":
		return detected, "the data dir's Raft log is there", nil
	case want != "":
		return want, "asked for, and the data dir has no Raft log yet", nil
	}
	return DefaultLogStore, "the default for a data dir with no Raft log yet", nil
}

// Bounds of Options.WALSegmentBytes. The default is raft-wal's own
// (wal.DefaultSegmentSize); a segment's size limit is a uint32 in its
// metadata.
const (
	DefaultWALSegmentBytes = 64 << 20
	MinWALSegmentBytes     = 64 << 10
	MaxWALSegmentBytes     = 1 << 30
)

// openWAL opens (or creates) the WAL under raftDir with segment files of
// segmentBytes (0: the default); wrap, if set, wraps the file system its
// segment files are written through (Options.WrapWALFS). A changed size
// applies to the segments created from then on.
func openWAL(raftDir string, segmentBytes int, hlog hclog.Logger, wrap func(waltypes.VFS) waltypes.VFS) (*wal.WAL, error) {
	dir := filepath.Join(raftDir, walDirName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create raft wal dir: %w", err)
	}
	// The new directory's entry must be durable before the WAL's files in
	// it are: detectLogStore goes by it.
	if err := syncDir(raftDir); err != nil {
		return nil, fmt.Errorf("create raft wal dir: %w", err)
	}
	var vfs waltypes.VFS = walfs.New()
	if wrap != nil {
		vfs = wrap(vfs)
	}
	if segmentBytes == 0 {
		segmentBytes = DefaultWALSegmentBytes
	}
	finished, err := finishInterruptedRotation(dir, vfs, segmentBytes, time.Now())
	if err != nil {
		return nil, err
	}
	if finished {
		hlog.Warn("raft wal: recorded the seal of a tail segment whose rotation a crash interrupted")
	}
	w, err := wal.Open(dir, wal.WithLogger(hlog.Named("wal")), wal.WithSegmentFiler(walSegmentFiler(dir, vfs)),
		wal.WithSegmentSize(segmentBytes))
	if err != nil {
		return nil, fmt.Errorf("open raft wal: %w", err)
	}
	return w, nil
}

// walSegmentFiler is how the WAL in dir keeps its segment files: raft-wal's
// own format through vfs, with sealed segments' writers let go of
// (releaseSealed, wal_sealed.go).
func walSegmentFiler(dir string, vfs waltypes.VFS) waltypes.SegmentFiler {
	return releaseSealed(segment.NewFiler(dir, vfs))
}

// openLogStore opens the Raft log store of o.Dir, bolt being its
// raft-boltdb file (the stable store): bolt itself, or a WAL
// (chooseLogStore). It logs the choice once. o has its defaults set.
func openLogStore(o Options, bolt *raftboltdb.BoltStore) (raft.LogStore, error) {
	detected, err := detectLogStore(o.Dir, bolt)
	if err != nil {
		return nil, err
	}
	store, reason, err := chooseLogStore(o.LogStore, detected)
	if err != nil {
		return nil, err
	}
	o.Logger.Info("raft log store", "store", store, "why", reason, "asked", o.LogStore)
	if store == LogStoreBoltDB {
		return bolt, nil
	}
	w, err := openWAL(o.Dir, o.WALSegmentBytes, o.RaftLogger, o.WrapWALFS)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// syncDir fsyncs the directory dir, so the entries created in it are
// durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
