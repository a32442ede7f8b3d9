package log

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/logd-dev/logd/internal/failpoint"
)

// DeleteBefore deletes, oldest first, every closed segment whose EndOffset is
// <= offset, and returns how many it deleted. It never deletes the active
// segment. StartOffset becomes the base offset of the first remaining
// segment. It waits for in-flight reads of the deleted segments to finish.
// The files are unlinked; ReleaseRetired closes them, which frees the space.
func (l *Log) DeleteBefore(offset int64) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return 0, err
	}
	st := l.state.Load()
	k := 0
	for k < len(st.closed) && st.closed[k].end <= offset {
		k++
	}
	if k == 0 {
		return 0, nil
	}
	next := *st
	next.closed = slices.Clone(st.closed[k:])
	for _, v := range st.closed[:k] {
		next.closedBytes -= v.size
	}
	l.filesMu.Lock()
	defer l.filesMu.Unlock()
	l.state.Store(&next)
	for _, v := range st.closed[:k] {
		l.retired = append(l.retired, v.seg)
		if err := removeSegmentFiles(l.fsys, l.dir, v.seg.base()); err != nil {
			// The files may come back at the next Open: the state on disk
			// no longer matches this Log's.
			l.err = fmt.Errorf("delete segment %d: %w", v.seg.base(), err)
			return 0, l.err
		}
		failpoint.Inject("logRetentionDelete")
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		l.err = fmt.Errorf("delete segments: sync dir: %w", err)
		return 0, l.err
	}
	return k, nil
}

// TruncateTo drops every batch at or above end, which must be the base
// offset of a batch or EndOffset (else ErrNotBatchBoundary), within
// [StartOffset, EndOffset] (else *OutOfRangeError). AppliedIndex becomes that
// of the last remaining batch (if none remains, the base applied index of the
// first segment: the applied index before its first batch). If end is the base offset of a segment other than the first,
// that segment is deleted and the one before it becomes active again. The
// result is synced before TruncateTo returns.
func (l *Log) TruncateTo(end int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	st := l.state.Load()
	if start, last := st.start(), st.end(); end < start || end > last {
		return &OutOfRangeError{Offset: end, Start: start, End: last}
	} else if end == last {
		return nil
	}
	t := st.find(end)
	tv := st.at(t)
	if end == tv.seg.base() && t > 0 {
		t--
		tv = st.at(t)
	}
	pos := tv.size
	if end < tv.end {
		p, h, err := locate(tv, end, true)
		if errors.Is(err, errIndexMismatch) {
			p, h, err = locate(tv, end, false)
		}
		if err != nil {
			return err
		}
		if h.baseOffset != end {
			return fmt.Errorf("%w: offset %d is inside the batch at %d", ErrNotBatchBoundary, end, h.baseOffset)
		}
		pos = p
	}
	// Rebuild the target's index and extent from its data, before changing
	// anything: it becomes the active segment.
	seg := tv.seg
	b := newIndexBuilder(l.opts.IndexIntervalBytes)
	ix := &index{}
	res, err := walk(segReader(seg, pos, scanWindow), seg.base(), 0, seg.base(), math.MaxInt64, &b, ix)
	if err != nil {
		return fmt.Errorf("log: read segment %d: %w", seg.base(), err)
	}
	if res.stop != "" || res.end != pos {
		return corrupt(seg.base(), res.end, "%s", res.stop)
	}
	applied := seg.meta.baseApplied
	if res.batches > 0 {
		applied += uint64(res.last.epoch)
	}

	l.filesMu.Lock()
	defer l.filesMu.Unlock()
	next := &state{
		closed:      slices.Clone(st.closed[:t]),
		active:      segView{seg: seg, size: pos, end: res.next, maxTs: b.maxTs, applied: applied},
		closedBytes: 0,
	}
	for _, v := range next.closed {
		next.closedBytes += v.size
	}
	l.state.Store(next)
	fail := func(err error) error {
		l.err = fmt.Errorf("truncate to %d: %w", end, err)
		return l.err
	}
	// Newest first, so a crash leaves a contiguous prefix.
	for i := st.n() - 1; i > t; i-- {
		s := st.at(i).seg
		err := s.close()
		if rerr := removeSegmentFiles(l.fsys, l.dir, s.base()); rerr != nil {
			err = rerr
		}
		if err != nil {
			return fail(err)
		}
	}
	if err := seg.data.Truncate(pos); err != nil {
		return fail(fmt.Errorf("segment %d: %w", seg.base(), err))
	}
	if err := seg.data.Sync(); err != nil {
		return fail(fmt.Errorf("sync segment %d: %w", seg.base(), err))
	}
	if err := seg.closeIndexFiles(); err != nil {
		return fail(err)
	}
	if err := seg.writeIndexFiles(l.fsys, ix); err != nil {
		return fail(err)
	}
	if err := seg.openIndexFiles(l.fsys); err != nil {
		return fail(err)
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return fail(fmt.Errorf("sync dir: %w", err))
	}
	seg.idx.Store(ix)
	seg.indexDirty.Store(false)
	l.builder = b
	l.unsynced = false
	return nil
}

// ReleaseRetired closes the files of the segments that compactions replaced
// and DeleteBefore deleted since the last call, which frees their disk space
// and page cache. That can take long for large segments, so the mutators
// leave it to this method, which any goroutine may call at any time: it
// holds up neither Append nor Read (no reader can reach a retired segment).
// Close releases whatever is left.
func (l *Log) ReleaseRetired() error {
	l.mu.Lock()
	segs := l.retired
	l.retired = nil
	l.mu.Unlock()
	var errs []error
	for _, seg := range segs {
		errs = append(errs, seg.close())
	}
	return errors.Join(errs...)
}
