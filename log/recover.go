package log

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
)

// scanWindow is the read-ahead of recovery walks.
const scanWindow = 256 << 10

// Open opens the log in dir, creating dir if missing, and recovers it:
//
//   - Every segment needs its .meta (else *CorruptionError), except an empty
//     last data file without one, left by an interrupted roll, which is
//     removed, as are index and .meta files without a data file and
//     temporary files.
//   - Closed segments (all but the last) are checked cheaply: their indexes
//     are loaded and checked (and rebuilt from the data file if implausible),
//     and batch headers are walked from the last index entry to the end of
//     the file, which must be exactly where the last batch ends, with dense
//     offsets; the next segment must start at its end offset. Batch CRCs of
//     closed segments are verified lazily, by every Read.
//   - The active (last) segment's headers are walked from its start,
//     rebuilding its indexes, and CRCs are verified from its last on-disk
//     index entry on. At the first bad batch: if no whole valid batch follows
//     it, it is a torn tail and the file is truncated there (and synced);
//     otherwise Open fails with a *CorruptionError.
func Open(dir string, opts Options) (*Log, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	l := &Log{dir: dir, opts: opts, fsys: opts.FS}
	if err := l.fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("log: open %s: %w", dir, err)
	}
	st, err := l.recover()
	if err != nil {
		for i := range st.n() {
			st.at(i).seg.close()
		}
		return nil, err
	}
	l.lastSync = opts.Now()
	l.state.Store(st)
	return l, nil
}

// recover opens every segment. On error, the returned state holds the
// segments opened so far, for the caller to close.
func (l *Log) recover() (*state, error) {
	st := &state{}
	if err := l.finishSwap(); err != nil {
		return st, err
	}
	names, err := l.fsys.ReadDir(l.dir)
	if err != nil {
		return st, fmt.Errorf("log: open %s: %w", l.dir, err)
	}
	files := map[int64]map[string]bool{}
	var bases []int64
	removed := false
	for _, name := range names {
		base, ext, ok := parseSegName(name)
		if !ok {
			if len(name) > len(extTmp) && name[len(name)-len(extTmp):] == extTmp {
				if err := l.fsys.Remove(l.dir + "/" + name); err != nil {
					return st, fmt.Errorf("log: remove %s: %w", name, err)
				}
				removed = true
			}
			continue
		}
		if files[base] == nil {
			files[base] = map[string]bool{}
		}
		files[base][ext] = true
		if ext == extLog {
			bases = append(bases, base)
		}
	}
	slices.Sort(bases)
	// Files of no segment: leftovers of a deletion or of an interrupted roll.
	for base, exts := range files {
		if exts[extLog] {
			continue
		}
		if err := removeSegmentFiles(l.fsys, l.dir, base); err != nil {
			return st, fmt.Errorf("log: %w", err)
		}
		removed = true
	}

	// An interrupted roll: an empty last data file without its .meta.
	if n := len(bases); n > 0 && !files[bases[n-1]][extMeta] {
		if fi, err := l.fsys.Stat(segPath(l.dir, bases[n-1], extLog)); err == nil && fi.Size() == 0 {
			if err := removeSegmentFiles(l.fsys, l.dir, bases[n-1]); err != nil {
				return st, fmt.Errorf("log: %w", err)
			}
			removed = true
			bases = bases[:n-1]
		}
	}

	for i, base := range bases {
		last := i == len(bases)-1
		if !files[base][extMeta] {
			return st, &CorruptionError{Segment: base, Position: -1, Err: errors.New("missing .meta file")}
		}
		seg, size, err := l.openSegment(base)
		if err != nil {
			return st, err
		}
		var v segView
		if last {
			v, err = l.recoverActive(seg, size)
		} else {
			v, err = l.recoverClosed(seg, size)
		}
		if err != nil {
			seg.close()
			return st, err
		}
		if n := st.n(); n > 0 && st.active.end != base {
			seg.close()
			return st, corrupt(base, 0, "segment starts at offset %d, previous one ends at %d", base, st.active.end)
		}
		if st.active.seg != nil {
			st.closed = append(st.closed, st.active)
			st.closedBytes += st.active.size
		}
		st.active = v
	}
	if removed {
		if err := l.fsys.SyncDir(l.dir); err != nil {
			return st, fmt.Errorf("log: sync dir %s: %w", l.dir, err)
		}
	}
	return st, nil
}

// openSegment opens a segment's data file and reads its .meta.
func (l *Log) openSegment(base int64) (*segment, int64, error) {
	mf, err := l.fsys.OpenFile(segPath(l.dir, base, extMeta), os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("log: open meta of segment %d: %w", base, err)
	}
	mb, err := readAll(mf)
	mf.Close()
	if err != nil {
		return nil, 0, fmt.Errorf("log: read meta of segment %d: %w", base, err)
	}
	m, err := decodeMeta(mb)
	if err != nil {
		return nil, 0, &CorruptionError{Segment: base, Position: -1, Err: err}
	}
	if m.base != base {
		return nil, 0, corrupt(base, -1, ".meta says base offset %d", m.base)
	}
	seg := &segment{dir: l.dir, meta: m}
	seg.data, err = l.fsys.OpenFile(seg.path(extLog), os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("log: open segment %d: %w", base, err)
	}
	fi, err := seg.data.Stat()
	if err != nil {
		seg.data.Close()
		return nil, 0, fmt.Errorf("log: stat segment %d: %w", base, err)
	}
	if fi.Size() > math.MaxUint32+int64(maxMaxBatchBytes) {
		seg.data.Close()
		return nil, 0, corrupt(base, -1, "data file of %d bytes is too large", fi.Size())
	}
	return seg, fi.Size(), nil
}

// recoverClosed checks a closed segment cheaply (see Open).
func (l *Log) recoverClosed(seg *segment, size int64) (segView, error) {
	base := seg.base()
	r := segReader(seg, size, scanWindow)
	b := newIndexBuilder(l.opts.IndexIntervalBytes)
	ix := loadIndex(readFileIfExists(l.fsys, seg.path(extIndex)), readFileIfExists(l.fsys, seg.path(extTimeIndex)), size)
	pos, next := int64(0), base
	if ix != nil && ix.n() > 0 {
		i := ix.n() - 1
		rel, p := ix.entry(i)
		h, ok, err := headerAt(r, p)
		if err != nil {
			return segView{}, fmt.Errorf("log: read segment %d: %w", base, err)
		}
		if ok && h.baseOffset == base+int64(rel) && h.maxTs <= ix.maxTs(i) {
			pos, next, b.maxTs = p, h.baseOffset, ix.maxTs(i)
		} else {
			ix = nil
		}
	}
	rebuilt := ix == nil
	if rebuilt {
		ix = &index{}
	}
	n0 := ix.n()
	res, err := walk(r, base, pos, next, math.MaxInt64, &b, ix)
	if err != nil {
		return segView{}, fmt.Errorf("log: read segment %d: %w", base, err)
	}
	if res.stop != "" {
		return segView{}, corrupt(base, res.end, "%s", res.stop)
	}
	if res.batches == 0 {
		return segView{}, corrupt(base, 0, "closed segment is empty")
	}
	if rebuilt || ix.n() != n0 {
		if err := seg.writeIndexFiles(l.fsys, ix); err != nil {
			return segView{}, fmt.Errorf("log: %w", err)
		}
	}
	seg.idx.Store(ix)
	return segView{
		seg:     seg,
		size:    size,
		end:     res.next,
		maxTs:   b.maxTs,
		applied: seg.meta.baseApplied + uint64(res.last.epoch),
	}, nil
}

// headerAt reads and checks the framing of the batch header at pos.
func headerAt(r *reader, pos int64) (header, bool, error) {
	if pos+headerSize > r.limit {
		return header{}, false, nil
	}
	hb, err := r.peek(pos, headerSize)
	if err != nil {
		return header{}, false, err
	}
	h := parseHeader(hb)
	return h, h.checkStored(hb[offMagic], r.compacted) == "", nil
}

// recoverActive walks the active segment, rebuilding its index, and cuts a
// torn tail (see Open).
func (l *Log) recoverActive(seg *segment, size int64) (segView, error) {
	base := seg.base()
	r := segReader(seg, size, scanWindow)
	// Verify CRCs from the last on-disk index entry on (bytes before it were
	// written before the entry was), if the walk finds that entry too.
	onDisk := loadIndex(readFileIfExists(l.fsys, seg.path(extIndex)), readFileIfExists(l.fsys, seg.path(extTimeIndex)), size)
	crcFrom := int64(0)
	if onDisk != nil && onDisk.n() > 0 {
		_, crcFrom = onDisk.entry(onDisk.n() - 1)
	}
	var ix *index
	var res walkResult
	for {
		l.builder = newIndexBuilder(l.opts.IndexIntervalBytes)
		ix = &index{}
		var err error
		if res, err = walk(r, base, 0, base, crcFrom-1, &l.builder, ix); err != nil {
			return segView{}, fmt.Errorf("log: read segment %d: %w", base, err)
		}
		if crcFrom == 0 || hasEntry(ix, onDisk, onDisk.n()-1) {
			break
		}
		crcFrom = 0
	}
	if res.end < size {
		after, err := validBatchAfter(r, res.end, res.next)
		if err != nil {
			return segView{}, fmt.Errorf("log: read segment %d: %w", base, err)
		}
		if after {
			return segView{}, corrupt(base, res.end, "%s, with valid batches after it", res.stop)
		}
		if err := seg.data.Truncate(res.end); err != nil {
			return segView{}, fmt.Errorf("log: truncate torn tail of segment %d: %w", base, err)
		}
		if err := seg.data.Sync(); err != nil {
			return segView{}, fmt.Errorf("log: sync segment %d: %w", base, err)
		}
	}
	if onDisk == nil || !slices.Equal(onDisk.off, ix.off) || !slices.Equal(onDisk.tim, ix.tim) {
		if err := seg.writeIndexFiles(l.fsys, ix); err != nil {
			return segView{}, fmt.Errorf("log: %w", err)
		}
	}
	if err := seg.openIndexFiles(l.fsys); err != nil {
		return segView{}, fmt.Errorf("log: open index of segment %d: %w", base, err)
	}
	seg.idx.Store(ix)
	applied := seg.meta.baseApplied
	if res.batches > 0 {
		applied += uint64(res.last.epoch)
	}
	return segView{seg: seg, size: res.end, end: res.next, maxTs: l.builder.maxTs, applied: applied}, nil
}

// hasEntry reports whether ix holds entry i of other.
func hasEntry(ix, other *index, i int) bool {
	rel, pos := other.entry(i)
	j := ix.floorOffset(rel, ix.n())
	if j < 0 {
		return false
	}
	r, p := ix.entry(j)
	return r == rel && p == pos
}
