package catchup

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/internal/backupfile"
	"github.com/logd-dev/logd/replication/fsm"
)

// Backups (docs/operations.md, "Backup and restore"). A backup is a Raft
// snapshot, the one followers install, plus the bytes of every segment its
// manifest lists: the snapshot alone holds only the manifest of the
// partition logs (replication/fsm snapshot.go). Everything is at one Raft
// index: the snapshot is taken between applies, and the segment bytes are
// each listed segment's first Bytes bytes, which appends after the
// snapshot do not change. What can change them is a compaction, a trim or a topic
// deletion applied after the snapshot; those replace or unlink files, so
// Backup opens every listed file first and checks each is still the one
// listed, as the segment endpoint does for a follower (segment_serve.go):
// an open file keeps its bytes whatever is renamed over it or unlinked.
// When one changed before it was opened, Backup takes a new snapshot, up
// to backupAttempts times.
//
// RestoreBackup (restore.go) is the other half.

// backupAttempts bounds the snapshots one Backup takes when segments keep
// changing under it.
const backupAttempts = 3

// openedSegment is a listed segment with its files open.
type openedSegment struct {
	seg  backupfile.Segment
	data *os.File
}

// Snapshotter takes the Raft snapshot a backup holds: the node's Raft
// (package replication).
type Snapshotter interface {
	// Snapshot takes a snapshot of the state applied so far and opens it;
	// the caller closes the reader. Backup returns its error after
	// "backup: ", so it says which step failed.
	Snapshot() (*raft.SnapshotMeta, io.ReadCloser, error)
}

// BackupSource is the node a backup is taken of.
type BackupSource struct {
	// Snapshots takes the snapshot the backup holds. Required.
	Snapshots Snapshotter
	// Segments finds the files of the segments the snapshot lists: the
	// node's state machine. Required.
	Segments Segments
	// NodeID is the node's id, recorded in the header.
	NodeID string
	// Now is the clock of the header's creation time; default time.Now.
	Now func() time.Time
	// Logger receives progress; default slog.Default().
	Logger *slog.Logger
}

// Backup writes a backup of src, which must hold every write the caller
// needs in it (package replication takes it on a leader that applied its
// barrier): it takes a Raft snapshot, opens every segment it lists, calls
// start with the backup's header and size, and streams the file into the
// writer start returns. Nothing is buffered beyond a frame header and a
// segment's .meta file. An error from start ends the backup before
// anything is written; an error after that leaves the writer with a file
// that a restore refuses (it has no trailer).
func Backup(ctx context.Context, src BackupSource, start func(backend.BackupInfo) (io.Writer, error)) (backend.BackupInfo, error) {
	if src.Now == nil {
		src.Now = time.Now
	}
	if src.Logger == nil {
		src.Logger = slog.Default()
	}
	var lastErr error
	for range backupAttempts {
		if err := ctx.Err(); err != nil {
			return backend.BackupInfo{}, err
		}
		info, err := backupOnce(ctx, src, start)
		if !errors.Is(err, backend.ErrSegmentGone) {
			return info, err
		}
		lastErr = err
		src.Logger.Info("backup: a listed segment changed before it was opened; taking a new snapshot", "err", err)
	}
	return backend.BackupInfo{}, fmt.Errorf("backup: segments changed under %d snapshots in a row: %w", backupAttempts, lastErr)
}

func backupOnce(ctx context.Context, src BackupSource, start func(backend.BackupInfo) (io.Writer, error)) (backend.BackupInfo, error) {
	meta, rc, err := src.Snapshots.Snapshot()
	if err != nil {
		return backend.BackupInfo{}, fmt.Errorf("backup: %w", err)
	}
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 64<<10)
	line, contents, err := fsm.ReadSnapshotManifest(br)
	if err != nil {
		return backend.BackupInfo{}, fmt.Errorf("backup: %w", err)
	}
	if contents.Index != meta.Index {
		return backend.BackupInfo{}, fmt.Errorf("backup: snapshot %s at index %d holds a manifest of index %d", meta.ID, meta.Index, contents.Index)
	}
	segs, err := openSegments(src.Segments, contents.Segments)
	defer func() {
		for _, s := range segs {
			s.data.Close()
		}
	}()
	if err != nil {
		return backend.BackupInfo{}, err
	}
	h := backupfile.Header{
		FormatVersion: backupfile.Version, Node: src.NodeID, Index: meta.Index, Term: meta.Term, FeatureLevel: int(contents.Level),
		Created: src.Now().UTC(), SnapshotBytes: meta.Size, Segments: len(segs),
	}
	for _, s := range meta.Configuration.Servers {
		h.Cluster = append(h.Cluster, backupfile.Member{ID: string(s.ID), Address: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	list := make([]backupfile.Segment, len(segs))
	for i, s := range segs {
		list[i] = s.seg
		h.SegmentBytes += s.seg.Bytes
	}
	size, err := backupfile.EncodedSize(h, list)
	if err != nil {
		return backend.BackupInfo{}, fmt.Errorf("backup: %w", err)
	}
	info := backend.BackupInfo{Header: h, Size: size}
	w, err := start(info)
	if err != nil {
		return info, err
	}
	w = ctxWriter{ctx: ctx, w: w}
	bw, err := backupfile.NewWriter(w, h)
	if err != nil {
		return info, fmt.Errorf("backup: write header: %w", err)
	}
	if err := bw.WriteSnapshot(meta.Size, io.MultiReader(bytes.NewReader(line), br)); err != nil {
		return info, fmt.Errorf("backup: write snapshot: %w", err)
	}
	for _, s := range segs {
		if err := bw.WriteSegment(s.seg, io.NewSectionReader(s.data, 0, s.seg.Bytes)); err != nil {
			return info, fmt.Errorf("backup: write segment %d of %s-%d: %w", s.seg.Base, s.seg.Topic, s.seg.Partition, err)
		}
	}
	if err := bw.Close(); err != nil {
		return info, fmt.Errorf("backup: write trailer: %w", err)
	}
	src.Logger.Info("backup written", "index", h.Index, "term", h.Term, "segments", h.Segments, "bytes", size)
	return info, nil
}

// openSegments opens the data file and reads the .meta file of every
// listed segment, checking each is still the one listed (see the comment
// at the top of this file). A segment changed since is backend.ErrSegmentGone.
// The files opened are returned even with an error, for the caller to
// close.
func openSegments(segments Segments, listed []fsm.SnapshotSegment) ([]openedSegment, error) {
	out := make([]openedSegment, 0, len(listed))
	for _, l := range listed {
		name := fmt.Sprintf("segment %d of %s-%d", l.Base, l.Topic, l.Partition)
		s, err := segments.LookupSegment(l.Topic, l.TopicIndex, l.Partition, l.Base)
		if err != nil {
			return out, fmt.Errorf("backup: %s: %w", name, asGone(err))
		}
		f, err := os.Open(s.Data)
		if err != nil {
			return out, fmt.Errorf("backup: %s: %w", name, asGone(err))
		}
		out = append(out, openedSegment{data: f})
		metaBytes, err := os.ReadFile(s.Meta)
		if err != nil {
			return out, fmt.Errorf("backup: %s: %w", name, asGone(err))
		}
		// Look again now that both files are open: a compaction swapped in
		// before the opens shows here.
		if s, err = segments.LookupSegment(l.Topic, l.TopicIndex, l.Partition, l.Base); err != nil {
			return out, fmt.Errorf("backup: %s: %w", name, asGone(err))
		}
		fi, err := f.Stat()
		if err != nil {
			return out, fmt.Errorf("backup: %s: %w", name, err)
		}
		if fi.Size() < l.Bytes || s.Info.Compacted && (s.Info.EndOffset != l.End || s.Info.Bytes != l.Bytes) {
			return out, fmt.Errorf("backup: %s: %w: now %d bytes ending at %d, listed %d ending at %d",
				name, backend.ErrSegmentGone, fi.Size(), s.Info.EndOffset, l.Bytes, l.End)
		}
		out[len(out)-1].seg = backupfile.Segment{Topic: l.Topic, TopicIndex: l.TopicIndex, Partition: l.Partition,
			Base: l.Base, End: l.End, Bytes: l.Bytes, Meta: metaBytes}
	}
	return out, nil
}

// asGone makes a segment file that vanished (retention, a deleted topic)
// or a partition no longer there backend.ErrSegmentGone, which Backup retries.
func asGone(err error) error {
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, backend.ErrUnknownTopic) || errors.Is(err, backend.ErrUnknownPartition) {
		return fmt.Errorf("%w: %v", backend.ErrSegmentGone, err)
	}
	return err
}

// ctxWriter fails writes once ctx ends, so a backup to a caller that went
// away stops between frames' chunks.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}
