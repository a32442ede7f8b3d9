package log

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/logd-dev/logd/internal/failpoint"
)

// Compaction keeps, below a cleaning point, only the newest record of each
// key. The log parses only batch headers; what a record is (its key, whether
// its value is null) comes from a RecordCodec that the caller supplies (the
// replication layer passes one built on package batch), which keeps this
// package free of the record format and of compression codecs.
//
// Layout of a compacted segment. Each source segment gives one output
// segment with the same base offset, end offset, base applied index and
// creation time; its .meta is version 2 with the compacted flag. Offsets
// never change and nothing is reordered. A batch keeps its baseOffset and
// header; records the codec drops become gaps inside it. A batch that loses
// every record is not stored: the previous output batch's lastOffsetDelta is
// extended over it (only a header change and a CRC recomputation), and where
// there is no previous batch (at the start of a segment) an empty filler
// batch (61 bytes, recordCount 0) covers the removed offsets. So batches
// stay dense (each starts where the previous one ends), every segment ends
// where it ended before, and readers need only accept recordCount <=
// lastOffsetDelta+1 in compacted segments.
//
// Two phases, so the expensive part runs beside appends:
//
//   - PrepareCompaction (any goroutine, concurrently with Append and Read)
//     reads the closed source segments and writes the output beside them as
//     "<base>.<ext>.<seq>.cleaned" files, all fsynced, then the directory.
//   - CommitCompaction (the appender's goroutine, like Append) checks that
//     the sources are still the log's first closed segments, then writes the
//     swap marker "compaction.swap" (temporary file, fsync, rename, fsync
//     directory: this is the commit point), renames every .cleaned file over
//     its final name and fsyncs the directory. It leaves the marker: the next
//     commit replaces it (atomically, by rename) and Open removes it.
//
// Open finishes an interrupted swap: with a marker, the .cleaned files it
// names are renamed into place (roll forward); without one, every .cleaned
// file is removed (roll back). A crash at any point leaves all the old
// segments or all the new ones, never a mix.
//
// Why the marker stays. Commit runs in Apply, where every fsync delays every
// produce behind it; removing the marker durably would cost a remove and a
// third directory fsync per command. A marker left behind is harmless: its swap's
// renames are durable (synced before Commit returns), so rolling it forward
// finds none of its .cleaned files (names carry the prepare's sequence
// number, unique within a process) and renames nothing, and a later
// prepare's .cleaned files are still removed as uncommitted. Open removes it
// (and syncs) before any new prepare, whose sequence numbers restart.

// Record is what compaction needs to know of one record.
type Record struct {
	Offset    int64  // absolute offset
	Timestamp int64  // milliseconds
	Key       []byte // nil for a record without a key; such records are always kept
	Tombstone bool   // the value is null: a delete marker for Key
}

// RecordCodec looks inside stored batches for compaction. Both methods get a
// whole stored batch (its CRC already checked) and must not keep or modify it.
type RecordCodec interface {
	// Records calls fn for each record of batch, in offset order. Key may
	// alias batch and is valid only during fn.
	Records(batch []byte, fn func(Record)) error
	// Filter returns the batch holding only the records for which keep
	// returns true (called in offset order), with the header of batch
	// (baseOffset, partitionLeaderEpoch, lastOffsetDelta, timestamps)
	// unchanged and every kept record at its original offset; nil if it
	// keeps none. It may return batch itself if it keeps every record.
	Filter(batch []byte, keep func(Record) bool) ([]byte, error)
}

// CompactOptions says what to compact and how.
type CompactOptions struct {
	// Below is the cleaning point: the closed segments whose EndOffset is
	// <= Below (a prefix of the log) are compacted. The active segment never
	// is.
	Below int64
	// TombstoneHorizon drops tombstones whose timestamp (ms) is below it
	// (when they are the newest record of their key); newer ones are kept.
	// A caller computes it as cleaning time - delete.retention.ms.
	TombstoneHorizon int64
	// Codec reads and filters records. Required.
	Codec RecordCodec
	// IOBytesPerSec bounds the preparation's reads plus writes, in bytes per
	// second (compact_io.go); 0 is unbounded. It changes only the timing,
	// never the output.
	IOBytesPerSec int64
	// SyncBytes is how much output may be written between two syncs of
	// the file being written (compact_io.go); 0 is
	// DefaultCompactSyncBytes, negative syncs only once a file is complete.
	SyncBytes int64
}

// CompactionStats describes a prepared compaction.
type CompactionStats struct {
	Segments       int   // source segments
	InputBytes     int64 // bytes of the source segments
	OutputBytes    int64 // bytes of the compacted segments
	InputRecords   int64 // records read
	OutputRecords  int64 // records kept
	TombstonesKept int64 // tombstones kept (newer than the horizon)
}

// ErrCompactionStale means the log changed since PrepareCompaction (a source
// segment was deleted, or another compaction was committed): the prepared
// output no longer applies and must be discarded.
var ErrCompactionStale = errors.New("log: prepared compaction is stale")

// Compaction is a prepared compaction: its output files exist beside the
// sources, not yet in use. Commit or Discard it. Its methods must not be
// called concurrently with each other.
type Compaction struct {
	l       *Log
	io      *ioBudget // paces prepare's I/O; nil: unbounded
	seq     uint64
	sources []*segment // the source segments, oldest first
	outs    []*cleanedSeg
	stats   CompactionStats
	sum     uint32
	done    bool
}

// cleanedSeg is one output segment, written as .cleaned files.
type cleanedSeg struct {
	meta    segMeta
	size    int64
	end     int64
	maxTs   int64
	applied uint64
	ix      *index
}

// Stats describes the compaction.
func (c *Compaction) Stats() CompactionStats { return c.stats }

// Checksum is the CRC-32C of the output segments' data, in order: replicas
// that compacted the same bytes the same way have the same checksum.
func (c *Compaction) Checksum() uint32 { return c.sum }

// Sources describes the source segments (as they were when prepared).
func (c *Compaction) Sources() []SegmentInfo {
	out := make([]SegmentInfo, len(c.sources))
	st := c.l.state.Load()
	for i, s := range c.sources {
		out[i] = SegmentInfo{BaseOffset: s.base(), Closed: true, Compacted: s.meta.compacted}
		for _, v := range st.closed {
			if v.seg == s {
				out[i] = v.info(true)
			}
		}
	}
	return out
}

const (
	extCleaned = ".cleaned"
	swapMarker = "compaction.swap"
	swapMagic  = "LGDS"
)

func (c *Compaction) cleanedPath(base int64, ext string) string {
	return segPath(c.l.dir, base, ext) + "." + strconv.FormatUint(c.seq, 10) + extCleaned
}

// PrepareCompaction writes a compacted copy of the closed segments below
// opts.Below beside them and returns it, to be committed with
// CommitCompaction or discarded. It reads only closed segments, so it may
// run on any goroutine while Append and Read go on; a source segment deleted
// meanwhile makes it fail with ErrCompactionStale. With no closed segment
// below opts.Below it returns a Compaction with no sources, whose commit
// changes nothing.
//
// The output depends only on the source bytes and opts, so every replica
// holding the same segments prepares byte-identical output (same Checksum).
// Memory: one 24-byte entry (a 128-bit key hash and an offset) per distinct
// key in the sources, plus one batch at a time.
func (l *Log) PrepareCompaction(opts CompactOptions) (*Compaction, error) {
	if opts.Codec == nil {
		return nil, errors.New("log: PrepareCompaction without a codec")
	}
	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return nil, err
	}
	l.cleanSeq++
	c := &Compaction{l: l, seq: l.cleanSeq}
	st := l.state.Load()
	var views []segView
	for _, v := range st.closed {
		if v.end > opts.Below {
			break
		}
		views = append(views, v)
		c.sources = append(c.sources, v.seg)
	}
	l.mu.Unlock()
	c.stats.Segments = len(views)
	if len(views) == 0 {
		return c, nil
	}
	c.io = newIOBudget(opts.IOBytesPerSec, l.opts.Now, time.Sleep)
	err := c.prepare(views, opts)
	if err != nil {
		c.removeFiles()
		c.done = true
		return nil, err
	}
	return c, nil
}

// keyHash identifies a key in the key map. A 128-bit SHA-256 prefix keeps
// the map small (as Kafka's cleaner does with MD5); two keys colliding would
// need about 2^64 keys.
type keyHash [16]byte

func hashKey(k []byte) keyHash {
	s := sha256.Sum256(k)
	return keyHash(s[:16])
}

func (c *Compaction) prepare(views []segView, opts CompactOptions) error {
	// Pass 1: the newest offset of every key.
	latest := map[keyHash]int64{}
	for i := range views {
		err := c.l.eachBatch(&views[i], c.io, func(b []byte, h header) error {
			return opts.Codec.Records(b, func(r Record) {
				c.stats.InputRecords++
				if r.Key != nil {
					latest[hashKey(r.Key)] = r.Offset
				}
			})
		})
		if err != nil {
			return err
		}
	}
	keep := func(r Record) bool {
		if r.Key == nil {
			return true
		}
		if latest[hashKey(r.Key)] != r.Offset {
			return false
		}
		return !r.Tombstone || r.Timestamp >= opts.TombstoneHorizon
	}
	// Pass 2: write the survivors.
	crc := crc32.New(castagnoli)
	for i := range views {
		out, err := c.writeSegment(&views[i], opts, keep, func(b []byte) { crc.Write(b) })
		if err != nil {
			return err
		}
		c.outs = append(c.outs, out)
		c.stats.InputBytes += views[i].size
		c.stats.OutputBytes += out.size
	}
	c.sum = crc.Sum32()
	if err := c.l.fsys.SyncDir(c.l.dir); err != nil {
		return fmt.Errorf("log: compaction: sync dir: %w", err)
	}
	return nil
}

// eachBatch calls fn for every batch of a closed segment, checking framing
// and CRCs. It reads under filesMu, a chunk at a time, so it never holds up
// a deletion for long; a segment deleted meanwhile is ErrCompactionStale.
// Each chunk read is spent from io.
func (l *Log) eachBatch(v *segView, io *ioBudget, fn func(b []byte, h header) error) error {
	const chunk = 1 << 20
	base := v.seg.base()
	var buf []byte
	bufPos := int64(0)
	pos, next := int64(0), base
	for pos < v.size {
		if pos+headerSize > bufPos+int64(len(buf)) || pos+int64(batchLen(buf, pos-bufPos)) > bufPos+int64(len(buf)) {
			n := max(int64(chunk), int64(batchLen(buf, pos-bufPos)))
			n = min(n, v.size-pos)
			if cap(buf) < int(n) {
				buf = make([]byte, n)
			}
			buf = buf[:n]
			if err := l.readSource(v.seg, buf, pos); err != nil {
				return err
			}
			io.spend(len(buf))
			bufPos = pos
		}
		rel := pos - bufPos
		h := parseHeader(buf[rel:])
		if bad := h.checkStored(buf[rel+offMagic], v.seg.meta.compacted); bad != "" {
			return corrupt(base, pos, "%s", bad)
		}
		if h.baseOffset != next {
			return corrupt(base, pos, "baseOffset %d, want %d", h.baseOffset, next)
		}
		if pos+h.size > v.size {
			return corrupt(base, pos, "incomplete batch")
		}
		if rel+h.size > int64(len(buf)) {
			continue // read it whole at the top of the loop
		}
		b := buf[rel : rel+h.size]
		if batchCRC(b) != h.crc {
			return corrupt(base, pos, "CRC mismatch")
		}
		if err := fn(b, h); err != nil {
			return fmt.Errorf("log: compaction: segment %d at %d: %w", base, pos, err)
		}
		pos += h.size
		next = h.nextOffset()
	}
	return nil
}

// batchLen is the size of the batch whose header starts at rel in buf, or
// headerSize if the header is not (all) in buf.
func batchLen(buf []byte, rel int64) int {
	if rel < 0 || rel+headerSize > int64(len(buf)) {
		return headerSize
	}
	return int(max(int64(headerSize), lengthOverhead+int64(int32(binary.BigEndian.Uint32(buf[rel+offBatchLength:])))))
}

// readSource reads from a source segment while it is still in the log.
func (l *Log) readSource(seg *segment, p []byte, pos int64) error {
	l.filesMu.RLock()
	defer l.filesMu.RUnlock()
	st := l.state.Load()
	if st.shut {
		return ErrClosed
	}
	if !slices.ContainsFunc(st.closed, func(v segView) bool { return v.seg == seg }) {
		return fmt.Errorf("%w: segment %d is gone", ErrCompactionStale, seg.base())
	}
	if err := readFull(seg.data, p, pos); err != nil {
		return fmt.Errorf("log: compaction: read segment %d: %w", seg.base(), err)
	}
	return nil
}

// segWriter writes one output segment's data file through a buffer,
// stitching removed batches into the previous output batch or a filler.
type segWriter struct {
	f       File
	buf     []byte
	out     *cleanedSeg
	b       indexBuilder
	sum     func([]byte)
	pending []byte // the last output batch, not yet written: it may be extended
	end     int64  // offset after the last output batch (pending included)
	// The removed run not yet covered: its largest timestamp and applied
	// index delta.
	gapTs    int64
	gapEpoch uint32
	// io paces the writes; syncBytes is how much may be written before a
	// sync (<= 0: none until the end), unsynced what was written since.
	io                  *ioBudget
	syncBytes, unsynced int64
}

func (c *Compaction) writeSegment(v *segView, opts CompactOptions, keep func(Record) bool, sum func([]byte)) (*cleanedSeg, error) {
	base := v.seg.base()
	m := v.seg.meta
	m.compacted = true
	m.tombstoneTs = math.MaxInt64
	out := &cleanedSeg{meta: m, end: v.end, applied: v.applied, ix: &index{}}
	f, err := c.l.fsys.OpenFile(c.cleanedPath(base, extLog), os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log: compaction: create segment %d: %w", base, err)
	}
	syncBytes := opts.SyncBytes
	if syncBytes == 0 {
		syncBytes = DefaultCompactSyncBytes
	}
	w := &segWriter{f: f, io: c.io, syncBytes: syncBytes, out: out, b: newIndexBuilder(c.l.opts.IndexIntervalBytes), sum: sum, end: base, gapTs: math.MinInt64}
	err = c.l.eachBatch(v, c.io, func(b []byte, h header) error {
		filtered, err := opts.Codec.Filter(b, func(r Record) bool {
			k := keep(r)
			if k {
				c.stats.OutputRecords++
				if r.Tombstone && r.Key != nil {
					c.stats.TombstonesKept++
					out.meta.tombstoneTs = min(out.meta.tombstoneTs, r.Timestamp)
				}
			}
			return k
		})
		if err != nil {
			return err
		}
		if filtered == nil {
			return w.removed(h)
		}
		fh, err := checkFiltered(filtered, h)
		if err != nil {
			return err
		}
		if err := w.coverGap(h.baseOffset); err != nil {
			return err
		}
		if err := w.flushPending(); err != nil {
			return err
		}
		w.pending = slices.Clone(filtered)
		w.end = fh.nextOffset()
		return nil
	})
	if err == nil {
		err = w.coverGap(v.end)
	}
	if err == nil {
		err = w.flushPending()
	}
	if err == nil {
		err = w.flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("log: compaction: segment %d: %w", base, err)
	}
	out.maxTs = w.b.maxTs
	for _, x := range []struct {
		ext string
		b   []byte
	}{{extIndex, out.ix.off}, {extTimeIndex, out.ix.tim}, {extMeta, out.meta.encode()}} {
		if err := writeFileSynced(c.l.fsys, c.cleanedPath(base, x.ext), x.b); err != nil {
			return nil, fmt.Errorf("log: compaction: segment %d: %w", base, err)
		}
	}
	return out, nil
}

// checkFiltered checks a codec's output against the batch it filtered.
func checkFiltered(b []byte, src header) (header, error) {
	if len(b) < headerSize {
		return header{}, errors.New("codec returned a short batch")
	}
	h := parseHeader(b)
	switch {
	case h.size != int64(len(b)):
		return h, errors.New("codec returned a batch whose length is wrong")
	case h.checkStored(b[offMagic], true) != "":
		return h, fmt.Errorf("codec returned a bad batch: %s", h.checkStored(b[offMagic], true))
	case h.baseOffset != src.baseOffset || h.lastDelta != src.lastDelta || h.epoch != src.epoch:
		return h, errors.New("codec changed the batch's offsets or applied index")
	case batchCRC(b) != h.crc:
		return h, errors.New("codec returned a batch failing its CRC")
	}
	return h, nil
}

// removed accounts for a source batch that lost every record: the pending
// batch is extended over it if it can be, else it joins the uncovered gap.
func (w *segWriter) removed(h header) error {
	if p := w.pending; p != nil && w.gapTs == math.MinInt64 {
		ph := parseHeader(p)
		if d := h.nextOffset() - 1 - ph.baseOffset; d <= math.MaxInt32 {
			binary.BigEndian.PutUint32(p[offLastDelta:], uint32(d))
			binary.BigEndian.PutUint32(p[offLeaderEpoch:], h.epoch)
			w.end = h.nextOffset()
			return nil
		}
	}
	w.gapTs = max(w.gapTs, h.maxTs)
	w.gapEpoch = h.epoch
	return nil
}

// coverGap writes filler batches over the uncovered offsets before next.
func (w *segWriter) coverGap(next int64) error {
	if w.gapTs == math.MinInt64 {
		return nil
	}
	if err := w.flushPending(); err != nil {
		return err
	}
	for w.end < next {
		n := min(next-w.end, math.MaxInt32)
		if err := w.emit(filler(w.end, n, w.gapTs, w.gapEpoch)); err != nil {
			return err
		}
		w.end += n
	}
	w.gapTs = math.MinInt64
	return nil
}

// filler is an empty batch covering n offsets from base.
func filler(base, n, ts int64, epoch uint32) []byte {
	b := make([]byte, headerSize)
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(base))
	binary.BigEndian.PutUint32(b[offBatchLength:], headerSize-lengthOverhead)
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], epoch)
	b[offMagic] = batchMagic
	binary.BigEndian.PutUint32(b[offLastDelta:], uint32(n-1))
	binary.BigEndian.PutUint64(b[offLastDelta+4:], uint64(ts)) // baseTimestamp
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint64(b[43:], math.MaxUint64) // producerId -1
	binary.BigEndian.PutUint16(b[51:], math.MaxUint16) // producerEpoch -1
	binary.BigEndian.PutUint32(b[53:], math.MaxUint32) // baseSequence -1
	binary.BigEndian.PutUint32(b[offCRC:], batchCRC(b))
	return b
}

func (w *segWriter) flushPending() error {
	if w.pending == nil {
		return nil
	}
	p := w.pending
	w.pending = nil
	binary.BigEndian.PutUint32(p[offCRC:], batchCRC(p))
	return w.emit(p)
}

func (w *segWriter) emit(b []byte) error {
	h := parseHeader(b)
	w.b.add(w.out.ix, w.out.meta.base, w.out.size, h)
	w.out.size += h.size
	w.sum(b)
	w.buf = append(w.buf, b...)
	if len(w.buf) >= 1<<20 {
		return w.flush()
	}
	return nil
}

func (w *segWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	n, err := w.f.Write(w.buf)
	w.buf = w.buf[:0]
	if err != nil {
		return err
	}
	w.io.spend(n)
	// Sync as we go: a flush of SyncBytes at most, so the Raft log's
	// fsync never waits behind the whole output.
	if w.unsynced += int64(n); w.syncBytes > 0 && w.unsynced >= w.syncBytes {
		w.unsynced = 0
		return w.f.Sync()
	}
	return nil
}

// writeFileSynced creates (or replaces) name with b and syncs it.
func writeFileSynced(fsys FS, name string, b []byte) error {
	f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// removeFiles removes the compaction's .cleaned files (best effort: Open
// removes leftovers).
func (c *Compaction) removeFiles() {
	for _, s := range c.sources {
		for _, ext := range []string{extLog, extIndex, extTimeIndex, extMeta} {
			_ = c.l.fsys.Remove(c.cleanedPath(s.base(), ext))
		}
	}
}

// Discard removes a prepared compaction's files. It is a no-op after Commit
// or a previous Discard.
func (c *Compaction) Discard() {
	if c == nil || c.done {
		return
	}
	c.done = true
	c.removeFiles()
}

// CommitCompaction swaps a prepared compaction's segments in for its sources
// (see the layout notes above). It is serialized with the other mutators
// and must be called on the appender's goroutine. If the sources are no
// longer the log's first closed segments it discards c and returns
// ErrCompactionStale, changing nothing. Readers in flight finish on the old
// files first. An error after the commit point is sticky, like a failed
// Append: the caller should stop (Open completes the swap).
func (l *Log) CommitCompaction(c *Compaction) error {
	if c.l != l {
		return errors.New("log: compaction of another log")
	}
	if c.done {
		return fmt.Errorf("%w: already committed or discarded", ErrCompactionStale)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	if len(c.sources) == 0 {
		c.done = true
		return nil
	}
	st := l.state.Load()
	if len(st.closed) < len(c.sources) || !slices.EqualFunc(st.closed[:len(c.sources)], c.sources, func(v segView, s *segment) bool { return v.seg == s }) {
		c.Discard()
		return ErrCompactionStale
	}
	c.done = true
	marker := filepath.Join(l.dir, swapMarker)
	if err := writeFileAtomic(l.fsys, marker, c.encodeMarker()); err != nil {
		c.removeFiles()
		return fmt.Errorf("log: compaction: write swap marker: %w", err)
	}
	fail := func(err error) error {
		l.err = fmt.Errorf("log: compaction swap: %w", err)
		return l.err
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		// The marker may or may not be durable: Open decides.
		return fail(err)
	}

	// Committed. Swap the files under filesMu so no reader sees a half.
	l.filesMu.Lock()
	next := *st
	next.closed = slices.Clone(st.closed)
	var errs []error
	for i, o := range c.outs {
		base := o.meta.base
		for _, ext := range []string{extLog, extIndex, extTimeIndex, extMeta} {
			if err := l.fsys.Rename(c.cleanedPath(base, ext), segPath(l.dir, base, ext)); err != nil {
				errs = append(errs, err)
			}
		}
		failpoint.Inject("logCompactionSwap")
		seg := &segment{dir: l.dir, meta: o.meta}
		var err error
		if seg.data, err = l.fsys.OpenFile(seg.path(extLog), os.O_RDWR|os.O_APPEND, 0); err != nil {
			errs = append(errs, err)
			continue
		}
		seg.idx.Store(o.ix)
		next.closedBytes += o.size - next.closed[i].size
		next.closed[i] = segView{seg: seg, size: o.size, end: o.end, maxTs: o.maxTs, applied: o.applied}
		l.retired = append(l.retired, c.sources[i]) // renamed over: ReleaseRetired closes
	}
	if err := errors.Join(errs...); err != nil {
		l.filesMu.Unlock()
		return fail(err)
	}
	l.state.Store(&next)
	l.filesMu.Unlock()

	// The renames are durable before the commit is reported; the marker
	// stays (see the layout notes above).
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return fail(err)
	}
	return nil
}

// The swap marker: magic "LGDS", seq uint64, count uint32, base offsets
// int64..., CRC-32C of everything before it.
func (c *Compaction) encodeMarker() []byte {
	b := []byte(swapMagic)
	b = binary.BigEndian.AppendUint64(b, c.seq)
	b = binary.BigEndian.AppendUint32(b, uint32(len(c.outs)))
	for _, o := range c.outs {
		b = binary.BigEndian.AppendUint64(b, uint64(o.meta.base))
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeMarker(b []byte) (seq uint64, bases []int64, ok bool) {
	if len(b) < 20 || string(b[:4]) != swapMagic ||
		crc32.Checksum(b[:len(b)-4], castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return 0, nil, false
	}
	seq = binary.BigEndian.Uint64(b[4:])
	n := int(binary.BigEndian.Uint32(b[12:]))
	if len(b) != 20+8*n {
		return 0, nil, false
	}
	for i := range n {
		bases = append(bases, int64(binary.BigEndian.Uint64(b[16+8*i:])))
	}
	return seq, bases, true
}

// finishSwap completes or rolls back an interrupted compaction swap (see
// above); Open calls it before reading the segments.
func (l *Log) finishSwap() error {
	marker := filepath.Join(l.dir, swapMarker)
	mb := readFileIfExists(l.fsys, marker)
	changed := false
	if mb != nil {
		seq, bases, ok := decodeMarker(mb)
		if !ok {
			// The marker is renamed into place only once written and
			// synced, so a bad one is damage, not a crash.
			return corrupt(-1, -1, "swap marker %s is damaged", marker)
		}
		c := &Compaction{l: l, seq: seq}
		for _, base := range bases {
			for _, ext := range []string{extLog, extIndex, extTimeIndex, extMeta} {
				from := c.cleanedPath(base, ext)
				if _, err := l.fsys.Stat(from); err != nil {
					continue // renamed before the crash
				}
				if err := l.fsys.Rename(from, segPath(l.dir, base, ext)); err != nil {
					return fmt.Errorf("log: finish compaction swap: %w", err)
				}
			}
		}
		if err := l.fsys.SyncDir(l.dir); err != nil {
			return fmt.Errorf("log: finish compaction swap: %w", err)
		}
		if err := l.fsys.Remove(marker); err != nil {
			return fmt.Errorf("log: finish compaction swap: %w", err)
		}
		changed = true
	}
	names, err := l.fsys.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("log: open %s: %w", l.dir, err)
	}
	for _, name := range names {
		if len(name) > len(extCleaned) && name[len(name)-len(extCleaned):] == extCleaned {
			if err := l.fsys.Remove(filepath.Join(l.dir, name)); err != nil {
				return fmt.Errorf("log: remove %s: %w", name, err)
			}
			changed = true
		}
	}
	if changed {
		if err := l.fsys.SyncDir(l.dir); err != nil {
			return fmt.Errorf("log: sync dir %s: %w", l.dir, err)
		}
	}
	return nil
}
