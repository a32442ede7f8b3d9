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

// Backups (docs/operations.md, "Backup and restore"). A backup is a cut of
// the meta group and one of each data group that holds partitions, each
// taken after the meta group's (package replication chooses the replicas
// and checks the cuts against each other). A cut is a Raft snapshot, the
// one followers install, plus the bytes of every segment its manifest
// lists: the snapshot alone holds only the manifest of the partition logs
// (replication/fsm snapshot.go). A cut is at one Raft index of its group:
// the snapshot is taken between applies, and the segment bytes are each
// listed segment's first Bytes bytes, which appends after the snapshot do
// not change. What can change them is a compaction, a trim or a topic
// deletion applied after the snapshot; those replace or unlink files, so
// TakeCut opens every listed file first and checks each is still the one
// listed, as the segment endpoint does for a follower (segment_serve.go):
// an open file keeps its bytes whatever is renamed over it or unlinked.
// When one changed before it was opened, TakeCut takes a new snapshot, up
// to backupAttempts times. Every cut is taken, and holds its files open,
// before the file's first byte is written, whose header gives the file's
// size.
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

// BackupSource is the replica of one group a cut is taken of.
type BackupSource struct {
	// Snapshots takes the snapshot the cut holds. Required.
	Snapshots Snapshotter
	// Segments finds the files of the segments the snapshot lists: the
	// group's state machine. Required.
	Segments Segments
	// Group is the group's id (0: the meta group).
	Group uint64
	// MinIndex is the least Raft index the snapshot may be at: one that
	// covers every write the caller needs in the cut (a data group's
	// leader's applied index, which a follower waited for).
	MinIndex uint64
	// NodeID is the node's id, recorded in the backup.
	NodeID string
	// Logger receives progress; default slog.Default().
	Logger *slog.Logger
}

// CutInfo describes a cut: what a part of a backup file holds and what a
// backup compares between the meta group's cut and the data groups'.
// It crosses between nodes as JSON (package replication's calls).
type CutInfo struct {
	Group uint64 `json:"group"`
	// Node is the node whose replica the cut was taken of.
	Node  string `json:"node"`
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	// Level is the highest feature level an entry the group applied
	// needed.
	Level fsm.FeatureLevel `json:"level"`
	// Cluster is the group's Raft configuration at the snapshot.
	Cluster       []backupfile.Member `json:"cluster"`
	SnapshotBytes int64               `json:"snapshot_bytes"`
	// Segments are the segments the snapshot lists, in its order, each
	// with its .meta file.
	Segments []backupfile.Segment `json:"segments"`
	// Topics are the topic incarnations the snapshot holds.
	Topics []fsm.SnapshotTopic `json:"topics"`
}

// SegmentBytes is the sum of the segments' bytes.
func (c CutInfo) SegmentBytes() int64 {
	var n int64
	for _, s := range c.Segments {
		n += s.Bytes
	}
	return n
}

// Cut is one group's state at one Raft index held for a backup: its
// snapshot open and the files of every segment it lists open, so nothing
// it lists changes under it (an open file keeps its bytes whatever is
// renamed over it or unlinked). Its body is the snapshot's bytes, then
// each segment's, in Info's order: what a part of the file holds beside
// its JSON frames. A cut is read once, by one goroutine; Close releases
// it.
type Cut struct {
	Info  CutInfo
	body  io.Reader
	close func() error
}

// NewCut is a cut of info whose body reads from body, released by close
// (nil: nothing to release): a cut held by another node, read over the
// network (package replication).
func NewCut(info CutInfo, body io.Reader, close func() error) *Cut {
	if close == nil {
		close = func() error { return nil }
	}
	return &Cut{Info: info, body: body, close: close}
}

// Read reads the cut's body.
func (c *Cut) Read(p []byte) (int, error) { return c.body.Read(p) }

// Close releases the cut's snapshot and files.
func (c *Cut) Close() error { return c.close() }

// Backup writes a backup of src alone, which must hold every write the
// caller needs in it (package replication takes it on a leader that
// applied its barrier): TakeCut, then WriteBackup with no data group.
func Backup(ctx context.Context, src BackupSource, start func(backend.BackupInfo) (io.Writer, error)) (backend.BackupInfo, error) {
	c, err := TakeCut(ctx, src)
	if err != nil {
		return backend.BackupInfo{}, err
	}
	defer c.Close()
	return WriteBackup(ctx, BackupFile{Meta: c, NodeID: src.NodeID, Logger: src.Logger}, start)
}

// TakeCut takes a cut of src: it takes a Raft snapshot and opens every
// segment it lists. When a listed segment changed before it was opened,
// it takes a new snapshot, up to backupAttempts times.
func TakeCut(ctx context.Context, src BackupSource) (*Cut, error) {
	if src.Logger == nil {
		src.Logger = slog.Default()
	}
	var lastErr error
	for range backupAttempts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c, err := takeCut(src)
		if !errors.Is(err, backend.ErrSegmentGone) {
			return c, err
		}
		lastErr = err
		src.Logger.Info("backup: a listed segment changed before it was opened; taking a new snapshot", "group", src.Group, "err", err)
	}
	return nil, fmt.Errorf("backup: segments changed under %d snapshots in a row: %w", backupAttempts, lastErr)
}

func takeCut(src BackupSource) (*Cut, error) {
	meta, rc, err := src.Snapshots.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	br := bufio.NewReaderSize(rc, 64<<10)
	line, contents, err := fsm.ReadSnapshotManifest(br)
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("backup: %w", err)
	}
	switch {
	case contents.Index > meta.Index:
		// Raft's index may be above the manifest's: the entries Raft
		// does not hand the state machine (a new leader's no-op, a
		// barrier) come after the last one it applied.
		rc.Close()
		return nil, fmt.Errorf("backup: snapshot %s at index %d holds a manifest of index %d", meta.ID, meta.Index, contents.Index)
	case contents.Group != src.Group:
		rc.Close()
		return nil, fmt.Errorf("backup: snapshot %s is of data group %d, not %d", meta.ID, contents.Group, src.Group)
	case meta.Index < src.MinIndex:
		rc.Close()
		return nil, fmt.Errorf("backup: snapshot %s of group %d at index %d, below %d", meta.ID, src.Group, meta.Index, src.MinIndex)
	}
	segs, err := openSegments(src.Segments, contents.Segments)
	closeAll := func() error {
		errs := []error{rc.Close()}
		for _, s := range segs {
			errs = append(errs, s.data.Close())
		}
		return errors.Join(errs...)
	}
	if err != nil {
		closeAll()
		return nil, err
	}
	info := CutInfo{Group: src.Group, Node: src.NodeID, Index: meta.Index, Term: meta.Term, Level: contents.Level, SnapshotBytes: meta.Size,
		Topics: contents.Topics, Cluster: []backupfile.Member{}, Segments: make([]backupfile.Segment, len(segs))}
	for _, s := range meta.Configuration.Servers {
		info.Cluster = append(info.Cluster, backupfile.Member{ID: string(s.ID), Address: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	parts := []io.Reader{&exactReader{r: io.MultiReader(bytes.NewReader(line), br), left: meta.Size}}
	for i, s := range segs {
		info.Segments[i] = s.seg
		parts = append(parts, io.NewSectionReader(s.data, 0, s.seg.Bytes))
	}
	return NewCut(info, io.MultiReader(parts...), closeAll), nil
}

// BackupFile is what WriteBackup writes.
type BackupFile struct {
	// Meta is the meta group's cut. Required.
	Meta *Cut
	// Groups are the data groups' cuts, in the order they are written:
	// each taken after Meta (docs/operations.md, "Backup and restore").
	Groups []*Cut
	// NodeID is the id of the node writing the backup.
	NodeID string
	// Now is the clock of the header's creation time; default time.Now.
	Now func() time.Time
	// Logger receives progress; default slog.Default().
	Logger *slog.Logger
}

// WriteBackup writes f: it calls start with the backup's header and
// size, and streams the file into the writer start returns, reading each
// cut's body once. Nothing is buffered beyond a frame header and a
// segment's .meta file. An error from start ends the backup before
// anything is written; an error after that leaves the writer with a file
// that a restore refuses (it has no trailer).
func WriteBackup(ctx context.Context, f BackupFile, start func(backend.BackupInfo) (io.Writer, error)) (backend.BackupInfo, error) {
	if f.Now == nil {
		f.Now = time.Now
	}
	if f.Logger == nil {
		f.Logger = slog.Default()
	}
	m := f.Meta.Info
	h := backupfile.Header{
		FormatVersion: backupfile.Version, Node: f.NodeID, Index: m.Index, Term: m.Term, FeatureLevel: int(m.Level),
		Created: f.Now().UTC(), SnapshotBytes: m.SnapshotBytes, Segments: len(m.Segments), SegmentBytes: m.SegmentBytes(), Cluster: m.Cluster,
	}
	groupSegs := make([][]backupfile.Segment, len(f.Groups))
	for i, c := range f.Groups {
		g := c.Info
		h.Groups = append(h.Groups, backupfile.Group{ID: g.Group, Node: g.Node, Index: g.Index, Term: g.Term, FeatureLevel: int(g.Level),
			Cluster: g.Cluster, SnapshotBytes: g.SnapshotBytes, Segments: len(g.Segments), SegmentBytes: g.SegmentBytes()})
		h.FeatureLevel = max(h.FeatureLevel, int(g.Level))
		h.Segments += len(g.Segments)
		h.SegmentBytes += g.SegmentBytes()
		groupSegs[i] = g.Segments
	}
	size, err := backupfile.EncodedSize(h, m.Segments, groupSegs...)
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
	if err := writePart(bw, f.Meta); err != nil {
		return info, err
	}
	for i, c := range f.Groups {
		if err := bw.WriteGroup(h.Groups[i]); err != nil {
			return info, fmt.Errorf("backup: write data group %d: %w", c.Info.Group, err)
		}
		if err := writePart(bw, c); err != nil {
			return info, err
		}
	}
	if err := bw.Close(); err != nil {
		return info, fmt.Errorf("backup: write trailer: %w", err)
	}
	f.Logger.Info("backup written", "index", h.Index, "term", h.Term, "data_groups", len(h.Groups), "segments", h.Segments, "bytes", size)
	return info, nil
}

// writePart writes c's snapshot and segments.
func writePart(bw *backupfile.Writer, c *Cut) error {
	g := c.Info.Group
	if err := bw.WriteSnapshot(c.Info.SnapshotBytes, c); err != nil {
		return fmt.Errorf("backup: write the snapshot of group %d: %w", g, err)
	}
	for _, s := range c.Info.Segments {
		if err := bw.WriteSegment(s, c); err != nil {
			return fmt.Errorf("backup: write segment %d of %s-%d (group %d): %w", s.Base, s.Topic, s.Partition, g, err)
		}
	}
	return nil
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

// exactReader reads exactly left bytes of r: r ending before is
// io.ErrUnexpectedEOF, so that the next part of a cut's body is never
// read in its place.
type exactReader struct {
	r    io.Reader
	left int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if err == io.EOF && e.left > 0 {
		return n, io.ErrUnexpectedEOF
	}
	if err == io.EOF {
		err = nil
	}
	return n, err
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
