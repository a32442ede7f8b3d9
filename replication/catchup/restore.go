package catchup

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/internal/backupfile"
	"github.com/logd-dev/logd/internal/slogbridge"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/replication/fsm"
)

// Restoring a backup (backup.go) into a new cluster.
//
// RestoreBackup builds the data directory of a single node that, once
// started, leads a new cluster of one voter holding the backup's state;
// other nodes join it as they would any cluster. It does what a follower
// does when it installs a snapshot: the state machine restores the
// snapshot and asks its SegmentFetcher for the segments it lacks, and the
// fetcher here reads them from the backup (in the order the state machine
// asks, which is the order Backup wrote them) through log.StageSegment,
// which checks every batch. The snapshot then goes into the new node's
// Raft snapshot store as the state at the backup's index, with a Raft
// configuration of the new node alone and an empty node registry
// (fsm.ForNewCluster).
//
// Each data group's part (backup file version 2) is restored the same
// way, as the node's replica of the group, the group's only voter, under
// groups/g<id>/; the meta group's table of data groups places every group
// on the new node alone (fsm.ForNewCluster), so the node runs each group
// as it was at its cut, and starts empty the groups the backup has no
// part of (they held no partition). Groups stay groups, rather than being
// folded into the meta group: a partition's directory, its offsets and
// its group's queue state, producer state and idempotency window stay as
// the group had them, and nodes that join later take replicas of them as
// of any group (docs/operations.md, "Backup and restore").
//
// Everything is written into a directory beside the target and renamed
// onto it only once the whole file has been read and its trailer checked,
// so a truncated or damaged backup (backupfile.ErrTruncated,
// *backupfile.CorruptError) leaves the target as it was.

// RestoreConfig says where and as which node a backup is restored.
type RestoreConfig struct {
	// DataDir is the new node's data directory; it must not exist or be
	// empty. Required.
	DataDir string
	// NodeID is the new node's id. Required.
	NodeID string
	// RaftAddress is the Raft address the new node will advertise
	// (replication.Config's RaftAdvertise, else RaftBind). Required.
	RaftAddress string
	// Log holds the partition log options; its FS is used for them.
	Log log.Options
	// Logger receives progress; default slog.Default().
	Logger *slog.Logger
	// Now is the restore's clock, which places the new cluster's Kafka
	// producer ids above the backup's (fsm.ProducerIDRestoreBase); default
	// time.Now.
	Now func() time.Time
}

// RestoreBackup reads a backup from r and builds cfg.DataDir from it (see
// above). It returns the backup's header.
func RestoreBackup(r io.Reader, cfg RestoreConfig) (backupfile.Header, error) {
	switch {
	case cfg.DataDir == "":
		return backupfile.Header{}, fmt.Errorf("%w: data dir is required", backend.ErrInvalidArgument)
	case cfg.NodeID == "":
		return backupfile.Header{}, fmt.Errorf("%w: node id is required", backend.ErrInvalidArgument)
	case cfg.RaftAddress == "":
		return backupfile.Header{}, fmt.Errorf("%w: raft address is required", backend.ErrInvalidArgument)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	target := filepath.Clean(cfg.DataDir)
	if entries, err := os.ReadDir(target); err == nil && len(entries) > 0 {
		return backupfile.Header{}, fmt.Errorf("%w: %s holds %d entries", ErrRestoreTarget, target, len(entries))
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return backupfile.Header{}, fmt.Errorf("restore: %w", err)
	}
	br, err := backupfile.NewReader(r)
	if err != nil {
		return backupfile.Header{}, fmt.Errorf("restore: %w", err)
	}
	h := br.Header()
	if fsm.FeatureLevel(h.FeatureLevel) > fsm.Level {
		return h, fmt.Errorf("%w: the backup is at feature level %d, this build reads up to %d", ErrBackupTooNew, h.FeatureLevel, fsm.Level)
	}
	tmp := target + ".restoring"
	if err := os.RemoveAll(tmp); err != nil {
		return h, fmt.Errorf("restore: remove an earlier attempt's %s: %w", tmp, err)
	}
	if err := restoreInto(tmp, br, cfg); err != nil {
		if rerr := os.RemoveAll(tmp); rerr != nil {
			cfg.Logger.Warn("restore: remove the partial data dir", "dir", tmp, "err", rerr)
		}
		return h, err
	}
	// An empty target is replaced; a missing one is created by the rename.
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		os.RemoveAll(tmp)
		return h, fmt.Errorf("restore: %w", err)
	}
	if err := os.Rename(tmp, target); err != nil {
		os.RemoveAll(tmp)
		return h, fmt.Errorf("restore: %w", err)
	}
	if err := syncDir(filepath.Dir(target)); err != nil {
		return h, fmt.Errorf("restore: %w", err)
	}
	cfg.Logger.Info("backup restored", "dir", target, "node", cfg.NodeID, "index", h.Index, "term", h.Term, "segments", h.Segments)
	return h, nil
}

func restoreInto(dir string, br *backupfile.Reader, cfg RestoreConfig) error {
	h := br.Header()
	now := cfg.Now()
	meta := restorePart{raftDir: filepath.Join(dir, "raft"), topicsDir: filepath.Join(dir, "topics"), index: h.Index, term: h.Term,
		rewrite: func(w io.Writer, r io.Reader) error { return fsm.ForNewCluster(w, r, now, cfg.NodeID) }}
	if err := meta.restore(br, cfg); err != nil {
		return err
	}
	groups := filepath.Join(dir, "groups")
	for {
		g, err := br.NextGroup()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		gdir := filepath.Join(groups, "g"+strconv.FormatUint(g.ID, 10))
		part := restorePart{raftDir: filepath.Join(gdir, "raft"), topicsDir: filepath.Join(gdir, "topics"), group: g.ID, index: g.Index, term: g.Term,
			rewrite: func(w io.Writer, r io.Reader) error {
				_, err := io.Copy(w, r)
				return err
			}}
		if err := part.restore(br, cfg); err != nil {
			return fmt.Errorf("restore: data group %d: %w", g.ID, err)
		}
		if err := syncDir(gdir); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
	}
	if len(h.Groups) > 0 {
		if err := syncDir(groups); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
	}
	return syncDir(dir)
}

// restorePart restores one group's part of a backup: the meta group's
// into the data directory's raft/ and topics/, a data group's into its
// groups/g<id>/ (the layout package replication opens: dataGroupDir).
type restorePart struct {
	raftDir, topicsDir string
	// group is the group's id (0: the meta group).
	group uint64
	// index and term are the part's snapshot's.
	index, term uint64
	// rewrite copies the part's snapshot into the new node's snapshot
	// store, changing what a new cluster must not keep.
	rewrite func(w io.Writer, r io.Reader) error
}

// restore reads the part's snapshot and segments from br: its snapshot
// goes into a Raft snapshot store at the part's index, with a Raft
// configuration of the new node alone, and its state machine restores it,
// taking the segments from the backup.
func (p restorePart) restore(br *backupfile.Reader, cfg RestoreConfig) error {
	if err := os.MkdirAll(p.raftDir, 0o755); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	// Raft's warnings go to the restore's logger, in its format.
	hlog := slogbridge.HCLog(cfg.Logger.Handler(), "raft", hclog.Warn)
	snaps, err := raft.NewFileSnapshotStoreWithLogger(p.raftDir, 2, hlog)
	if err != nil {
		return fmt.Errorf("restore: snapshot store: %w", err)
	}
	// The snapshot's peers field (a format raft keeps for old readers) is
	// encoded by a transport; an in-memory one encodes an address as is,
	// as the TCP transport does.
	_, trans := raft.NewInmemTransport("")
	defer trans.Close()
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(cfg.NodeID), Address: raft.ServerAddress(cfg.RaftAddress)}}}
	sink, err := snaps.Create(raft.SnapshotVersionMax, p.index, p.term, conf, p.index, trans)
	if err != nil {
		return fmt.Errorf("restore: create snapshot: %w", err)
	}
	snap, err := br.Snapshot()
	if err != nil {
		sink.Cancel()
		return fmt.Errorf("restore: %w", err)
	}
	if err := p.rewrite(sink, snap); err != nil {
		sink.Cancel()
		return fmt.Errorf("restore: snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("restore: write snapshot: %w", err)
	}
	// Raft's term must not be below the snapshot's: the new node's first
	// election is then in a later term than every entry it holds.
	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(p.raftDir, "raft.db"),
		BoltOptions: &bbolt.Options{FreelistType: bbolt.FreelistMapType, NoFreelistSync: true}})
	if err != nil {
		return fmt.Errorf("restore: raft store: %w", err)
	}
	err = store.SetUint64([]byte("CurrentTerm"), p.term)
	if cerr := store.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("restore: raft store: %w", err)
	}

	// The state machine restores the snapshot it will start from, and
	// takes the segments from the backup.
	_, rc, err := snaps.Open(sink.ID())
	if err != nil {
		return fmt.Errorf("restore: open snapshot: %w", err)
	}
	defer rc.Close()
	fetcher := &backupFetcher{br: br}
	sm := fsm.New(fsm.Config{Dir: p.topicsDir, Log: cfg.Log, Logger: cfg.Logger, Self: cfg.NodeID, Group: p.group, Fetcher: fetcher})
	if err := sm.Restore(rc); err != nil {
		sm.Close()
		if fetcher.err != nil {
			// The file's own error, not the state machine's wrapping of it.
			return fmt.Errorf("restore: %w", fetcher.err)
		}
		return fmt.Errorf("restore: %w", err)
	}
	if err := sm.Close(); err != nil {
		return fmt.Errorf("restore: close partition logs: %w", err)
	}
	// The rest of the part: segments the state machine did not ask for
	// may only be empty ones (of empty partitions).
	for {
		s, _, err := br.NextSegment()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		if s.Bytes != 0 {
			return fmt.Errorf("restore: %w", &backupfile.CorruptError{Reason: fmt.Sprintf("segment %d of %s-%d is not one the snapshot needs", s.Base, s.Topic, s.Partition)})
		}
	}
}

// backupFetcher is the state machine's SegmentFetcher during a restore:
// it reads the segments from the backup, in order.
type backupFetcher struct {
	br *backupfile.Reader
	// err is the first error of the backup file itself.
	err error
}

// FetchSegments implements fsm.SegmentFetcher.
func (b *backupFetcher) FetchSegments(req fsm.FetchRequest) error {
	if b.err != nil {
		return b.err
	}
	bases := make([]int64, 0, len(req.Segments))
	for _, want := range req.Segments {
		if err := b.stage(req, want); err != nil {
			b.err = err
			return err
		}
		bases = append(bases, want.Base)
	}
	return log.InstallStaged(req.Dir, req.Log, req.Keep, bases)
}

// stage finds want's frames, passing over empty segments of partitions
// the state machine did not ask for, and stages its data.
func (b *backupFetcher) stage(req fsm.FetchRequest, want fsm.SegmentExtent) error {
	for {
		s, data, err := b.br.NextSegment()
		if err == io.EOF {
			return fmt.Errorf("%w: segment %d of %s-%d missing", backupfile.ErrTruncated, want.Base, req.Topic, req.Partition)
		}
		if err != nil {
			return err
		}
		match := s.Topic == req.Topic && s.TopicIndex == req.TopicIndex && s.Partition == req.Partition && s.Base == want.Base
		if !match {
			if s.Bytes == 0 {
				continue
			}
			return &backupfile.CorruptError{Reason: fmt.Sprintf("segment %d of %s-%d where segment %d of %s-%d was expected",
				s.Base, s.Topic, s.Partition, want.Base, req.Topic, req.Partition)}
		}
		if s.End != want.End || s.Bytes != want.Bytes {
			return &backupfile.CorruptError{Reason: fmt.Sprintf("segment %d of %s-%d: %d bytes ending at %d, the snapshot lists %d ending at %d",
				s.Base, s.Topic, s.Partition, s.Bytes, s.End, want.Bytes, want.End)}
		}
		err = log.StageSegment(req.Dir, req.Log, log.SegmentInfo{BaseOffset: want.Base, EndOffset: want.End, Bytes: want.Bytes}, s.Meta, data)
		if err != nil {
			return fmt.Errorf("segment %d of %s-%d: %w", s.Base, s.Topic, s.Partition, err)
		}
		// Read the frame to its end, which checks its CRC.
		if _, err := io.Copy(io.Discard, data); err != nil {
			return err
		}
		return nil
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
