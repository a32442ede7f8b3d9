package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/logd-dev/logd/internal/failpoint"
)

// AppendMeta travels with one append (or Roll).
type AppendMeta struct {
	// AppliedIndex is an opaque caller index (a raft index), non-decreasing;
	// 0 leaves it unchanged. It survives restart with the data: see the
	// package documentation for how it is stored.
	AppliedIndex uint64
	// Time is the time used for age-based rolls; zero means Options.Now().
	// Replication passes the leader-stamped command time so every replica
	// rolls at the same batch.
	Time time.Time
}

// Log is one partition's segmented storage. One goroutine may call the
// mutating methods (Append, Roll, Sync, DeleteBefore, TruncateTo, Close; they
// are also serialized by a mutex) while any number of goroutines call Read,
// OffsetForTime and the getters.
type Log struct {
	dir  string
	opts Options
	fsys FS

	// state is the immutable view readers load; only the holder of mu
	// stores a new one.
	state atomic.Pointer[state]

	// filesMu is held for reading by readers for as long as they use the
	// files of a state they loaded, and for writing by whoever closes,
	// removes or shrinks files (DeleteBefore, TruncateTo, Close), so no
	// reader ever reads a closed file or bytes being rewritten.
	// Lock order: mu before filesMu.
	filesMu sync.RWMutex

	// mu serializes the mutators and guards the fields below.
	mu       sync.Mutex
	err      error        // sticky: the first failed write or sync; every later mutation returns it
	closed   bool         // Close was called
	builder  indexBuilder // index state of the active segment
	unsynced bool         // the active segment has bytes not yet synced
	writes   uint64       // batches written; Sync compares it across its unlocked fsync
	lastSync time.Time    // when the active segment was last synced (SyncInterval)
	cleanSeq uint64       // numbers prepared compactions (their file names)
	hdr      [headerSize]byte

	// retired are segments a compaction replaced or DeleteBefore deleted:
	// their files are unlinked but still open. Closing the last reference
	// to a large unlinked file frees its blocks and page cache, which takes
	// long (a third of a second for 800 MB), so the appender does not:
	// ReleaseRetired (or Close) does.
	retired []*segment
}

// Append validates batch and appends it, assigning it baseOffset EndOffset().
// An invalid batch (*InvalidBatchError, ErrBatchTooLarge) or a regressed
// applied index (ErrAppliedIndexRegressed) changes nothing. Any other error
// is an I/O failure, now sticky: the batch is not readable from this Log,
// every later mutation fails, and the caller should stop using the Log (see
// the package documentation for what a reopen finds). Append does not keep or
// modify batch.
func (l *Log) Append(batch []byte, meta AppendMeta) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return 0, err
	}
	h, err := validateBatch(batch, l.opts.MaxBatchBytes)
	if err != nil {
		return 0, err
	}
	st := l.state.Load()
	applied, err := l.nextApplied(st, meta)
	if err != nil {
		return 0, err
	}
	now := l.timeOf(meta)
	base := st.end()
	if l.mustRoll(st, h, applied, now) {
		if err := l.roll(baseApplied(st.applied(), applied), now); err != nil {
			return 0, err
		}
		st = l.state.Load()
	}
	act := st.active
	if applied-act.seg.meta.baseApplied > math.MaxUint32 {
		// Only an empty active segment gets here (mustRoll rolls a non-empty one).
		if err := l.rebaseEmpty(baseApplied(act.seg.meta.baseApplied, applied), now); err != nil {
			return 0, err
		}
		st = l.state.Load()
		act = st.active
	}
	seg := act.seg

	copy(l.hdr[:], batch[:headerSize])
	binary.BigEndian.PutUint64(l.hdr[offBaseOffset:], uint64(base))
	binary.BigEndian.PutUint32(l.hdr[offLeaderEpoch:], uint32(applied-seg.meta.baseApplied))
	h.baseOffset = base
	if err := l.write(seg, act.size, h, batch[headerSize:]); err != nil {
		return 0, err
	}
	if l.opts.Sync == SyncEveryAppend ||
		(l.opts.Sync == SyncInterval && l.opts.Now().Sub(l.lastSync) >= l.opts.SyncInterval) {
		if err := l.syncActive(); err != nil {
			return 0, err
		}
	}
	next := *st
	next.active = segView{
		seg:     seg,
		size:    act.size + h.size,
		end:     h.nextOffset(),
		maxTs:   max(act.maxTs, h.maxTs),
		applied: applied,
	}
	l.state.Store(&next)
	return base, nil
}

// write appends the batch (l.hdr then body) at pos of the active segment,
// and its index entries if due.
func (l *Log) write(seg *segment, pos int64, h header, body []byte) error {
	l.unsynced = true
	l.writes++
	_, err := seg.data.Write(l.hdr[:])
	if err == nil {
		failpoint.Inject("logSegmentWrite")
		_, err = seg.data.Write(body)
	}
	if err != nil {
		return l.fail(seg, pos, fmt.Errorf("append segment %d: %w", seg.base(), err))
	}
	old := seg.idx.Load()
	ix := *old
	if l.builder.add(&ix, seg.base(), pos, h) {
		_, err := seg.offFile.Write(ix.off[len(old.off):])
		if err == nil {
			_, err = seg.timFile.Write(ix.tim[len(old.tim):])
		}
		if err != nil {
			return l.fail(seg, pos, fmt.Errorf("append index of segment %d: %w", seg.base(), err))
		}
		seg.idx.Store(&ix)
	}
	return nil
}

// fail records a sticky write or sync error and tries to cut the active
// segment back to pos, its acknowledged size.
func (l *Log) fail(seg *segment, pos int64, err error) error {
	l.err = err
	if seg != nil {
		_ = seg.data.Truncate(pos) // best effort; recovery cuts a torn tail anyway
	}
	return err
}

func (l *Log) usable() error {
	if l.closed {
		return ErrClosed
	}
	return l.err
}

func (l *Log) nextApplied(st *state, meta AppendMeta) (uint64, error) {
	cur := st.applied()
	if meta.AppliedIndex == 0 {
		return cur, nil
	}
	if meta.AppliedIndex < cur {
		return 0, fmt.Errorf("%w: %d < %d", ErrAppliedIndexRegressed, meta.AppliedIndex, cur)
	}
	return meta.AppliedIndex, nil
}

func (l *Log) timeOf(meta AppendMeta) time.Time {
	if meta.Time.IsZero() {
		return l.opts.Now()
	}
	return meta.Time
}

// baseApplied is the base applied index for a segment created (or rebased)
// for a batch with applied index applied, when the log's is prev: prev if
// the delta fits in uint32, else the least base it fits with. Never applied
// itself: until the batch is durable, a recovered empty segment must not
// claim the batch's applied index.
func baseApplied(prev, applied uint64) uint64 {
	if applied-prev > math.MaxUint32 {
		return applied - math.MaxUint32
	}
	return prev
}

// mustRoll reports whether the batch h must go to a new segment.
func (l *Log) mustRoll(st *state, h header, applied uint64, now time.Time) bool {
	act := &st.active
	if act.seg == nil {
		return true
	}
	if act.size == 0 {
		return false
	}
	return act.size+h.size > l.opts.SegmentBytes ||
		now.Sub(time.Unix(0, act.seg.meta.created)) >= l.opts.SegmentMaxAge ||
		applied-act.seg.meta.baseApplied > math.MaxUint32 ||
		act.end+int64(h.lastDelta)+1-act.seg.base() > math.MaxUint32
}

// roll closes the active segment (syncing it) and creates a new one at
// EndOffset with the given base applied index and creation time. The new
// empty segment's view reports that base as the applied index.
func (l *Log) roll(applied uint64, now time.Time) error {
	st := l.state.Load()
	if old := st.active.seg; old != nil {
		if err := l.syncActive(); err != nil {
			return err
		}
		if err := old.syncIndexFiles(); err != nil {
			return l.fail(nil, 0, fmt.Errorf("roll segment %d: sync index: %w", old.base(), err))
		}
		if err := old.closeIndexFiles(); err != nil {
			return l.fail(nil, 0, fmt.Errorf("roll segment %d: close index: %w", old.base(), err))
		}
		failpoint.Inject("logRoll")
	}
	seg, err := createSegment(l.fsys, l.dir, segMeta{base: st.end(), baseApplied: applied, created: now.UnixNano()})
	if err != nil {
		return l.fail(nil, 0, err)
	}
	next := *st
	if st.active.seg != nil {
		next.closed = append(slices.Clip(st.closed), st.active)
		next.closedBytes += st.active.size
	}
	next.active = segView{seg: seg, end: st.end(), maxTs: math.MinInt64, applied: applied}
	l.builder = newIndexBuilder(l.opts.IndexIntervalBytes)
	l.unsynced = false
	l.lastSync = l.opts.Now()
	l.state.Store(&next)
	return nil
}

// rebaseEmpty replaces the .meta of the empty active segment, whose base
// applied index is too far behind the next batch's for a uint32 delta, with
// base applied index applied. This is the
// one case where a .meta is rewritten; the segment has no batch whose delta
// it could change.
func (l *Log) rebaseEmpty(applied uint64, now time.Time) error {
	st := l.state.Load()
	seg := st.active.seg
	m := segMeta{base: seg.base(), baseApplied: applied, created: now.UnixNano()}
	if err := writeFileAtomic(l.fsys, seg.path(extMeta), m.encode()); err != nil {
		return l.fail(nil, 0, fmt.Errorf("rebase segment %d: %w", m.base, err))
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return l.fail(nil, 0, fmt.Errorf("rebase segment %d: sync dir: %w", m.base, err))
	}
	// A new segment object: readers may hold the old one, whose meta must
	// not change under them.
	ns := &segment{dir: seg.dir, meta: m, data: seg.data, offFile: seg.offFile, timFile: seg.timFile}
	ns.idx.Store(seg.idx.Load())
	next := *st
	next.active = segView{seg: ns, end: st.active.end, maxTs: math.MinInt64, applied: st.active.applied}
	l.state.Store(&next)
	return nil
}

// syncActive syncs the active data file if it has unsynced bytes.
func (l *Log) syncActive() error {
	st := l.state.Load()
	seg := st.active.seg
	if seg == nil || !l.unsynced {
		return nil
	}
	failpoint.Inject("logFsync")
	if err := seg.data.Sync(); err != nil {
		return l.fail(seg, st.active.size, fmt.Errorf("sync segment %d: %w", seg.base(), err))
	}
	l.unsynced = false
	l.lastSync = l.opts.Now()
	return nil
}

// Roll closes the active segment and starts a new one at EndOffset, whose
// base applied index is meta.AppliedIndex (or the current one) and whose
// creation time is meta.Time (or Now). It is a no-op if the active segment is
// empty.
func (l *Log) Roll(meta AppendMeta) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	st := l.state.Load()
	applied, err := l.nextApplied(st, meta)
	if err != nil {
		return err
	}
	if st.active.seg == nil || st.active.size == 0 {
		return nil
	}
	return l.roll(applied, l.timeOf(meta))
}

// Sync makes every batch appended before it was called durable. The fsync
// runs without the mutators' lock, so Append goes on meanwhile: a caller
// that syncs while another appends (a snapshot's Persist beside Apply)
// holds up no append for the length of an fsync. What is appended meanwhile
// stays unsynced until the next Sync (or roll). A failed fsync is sticky,
// as under the lock: every later mutation returns it.
func (l *Log) Sync() error {
	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return err
	}
	seg := l.state.Load().active.seg
	if seg == nil || !l.unsynced {
		l.mu.Unlock()
		return nil
	}
	writes := l.writes
	// filesMu keeps the file open and unshrunk through the fsync; its
	// holders (Close, DeleteBefore, TruncateTo, a compaction swap) wait for
	// one fsync at most. Taken before mu is released: lock order.
	l.filesMu.RLock()
	l.mu.Unlock()
	failpoint.Inject("logFsync")
	err := seg.data.Sync()
	l.filesMu.RUnlock()

	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if l.err == nil {
			// As fail does, cut back to the acknowledged size, which now
			// includes the batches appended during the fsync (best
			// effort: recovery cuts a torn tail anyway).
			size := int64(-1)
			if st := l.state.Load(); st.active.seg == seg {
				size = st.active.size
			}
			l.err = fmt.Errorf("sync segment %d: %w", seg.base(), err)
			if size >= 0 {
				_ = seg.data.Truncate(size)
			}
		}
		return l.err
	}
	if l.writes == writes && l.state.Load().active.seg == seg {
		l.unsynced = false
		l.lastSync = l.opts.Now()
	}
	return nil
}

// Close syncs the active segment (whatever the policy) and closes every file.
// Reads after Close return ErrClosed; a second Close returns ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.closed = true
	st := l.state.Load()
	var errs []error
	if l.err == nil {
		errs = append(errs, l.syncActive())
		if seg := st.active.seg; seg != nil {
			if err := seg.syncIndexFiles(); err != nil {
				errs = append(errs, fmt.Errorf("sync index of segment %d: %w", seg.base(), err))
			}
		}
	}
	for i := range len(st.closed) {
		if seg := st.closed[i].seg; seg.indexDirty.Load() {
			// A reader rebuilt this index; it is a cache, so a failure
			// to persist it only costs a rebuild later.
			_ = seg.writeIndexFiles(l.fsys, seg.idx.Load())
		}
	}
	l.filesMu.Lock()
	defer l.filesMu.Unlock()
	for i := range st.n() {
		errs = append(errs, st.at(i).seg.close())
	}
	for _, seg := range l.retired {
		errs = append(errs, seg.close())
	}
	l.retired = nil
	next := *st
	next.shut = true
	l.state.Store(&next)
	return errors.Join(errs...)
}

// StartOffset is the offset of the first stored batch (EndOffset if none).
func (l *Log) StartOffset() int64 { return l.state.Load().start() }

// EndOffset is the next offset Append assigns.
func (l *Log) EndOffset() int64 { return l.state.Load().end() }

// AppliedIndex is the applied index of the last batch, or the base applied
// index of the active segment if it is empty (0 for an empty log).
func (l *Log) AppliedIndex() uint64 { return l.state.Load().applied() }

// Size is the total size of the data files.
func (l *Log) Size() int64 {
	st := l.state.Load()
	return st.closedBytes + st.active.size
}

// Segments describes every segment, oldest first.
func (l *Log) Segments() []SegmentInfo {
	st := l.state.Load()
	out := make([]SegmentInfo, st.n())
	for i := range out {
		out[i] = st.at(i).info(i < len(st.closed))
	}
	return out
}
