package log

import (
	"errors"
	"fmt"
	"math"
)

// errIndexMismatch reports an index entry that does not match the batch it
// points at: the index is damaged and must be rebuilt.
var errIndexMismatch = errors.New("log: index entry does not match the data")

// locateWindow is the read-ahead used to find a batch from an index entry:
// about one index interval of headers.
const locateWindow = 8 << 10

// Read returns whole batches, starting with the one holding offset, up to
// maxBytes in total but always at least one batch, continuing across
// segments. The returned slice belongs to the caller.
//
// An offset below StartOffset or above EndOffset is an *OutOfRangeError; at
// EndOffset Read returns (nil, nil). Every returned batch has passed its CRC
// and framing checks; if the first batch fails them Read returns a
// *CorruptionError, and a later failing batch ends the returned run early
// (the Read that starts at it reports it).
func (l *Log) Read(offset int64, maxBytes int) ([]byte, error) {
	b, _, _, err := l.ReadBounded(offset, maxBytes)
	return b, err
}

// ReadBounded is Read that also returns the log's start and end offsets as
// of the read: the returned batches never reach past that end, and a
// caller that reports the end beside the batches never claims records the
// batches lack though they fit in maxBytes.
func (l *Log) ReadBounded(offset int64, maxBytes int) (data []byte, start, end int64, err error) {
	return l.ReadRecords(offset, maxBytes, 0)
}

// ReadRecords is ReadBounded that reads no further than the batches
// holding maxRecords records from offset (0: no bound), found by the
// offset index, so a caller that wants few records of large reads does
// not read and check max bytes of them. It may return fewer records than
// maxRecords while the log holds more (at least the first batch); the
// next read goes on from where it ended.
func (l *Log) ReadRecords(offset int64, maxBytes, maxRecords int) (data []byte, start, end int64, err error) {
	l.filesMu.RLock()
	defer l.filesMu.RUnlock()
	st := l.state.Load()
	if st.shut {
		return nil, 0, 0, ErrClosed
	}
	start, end = st.start(), st.end()
	if offset < start || offset > end {
		return nil, start, end, &OutOfRangeError{Offset: offset, Start: start, End: end}
	} else if offset == end {
		return nil, start, end, nil
	}
	data, err = l.readAll(st, offset, maxBytes, maxRecords)
	return data, start, end, err
}

// readAll is ReadRecords on the state st.
func (l *Log) readAll(st *state, offset int64, maxBytes, maxRecords int) ([]byte, error) {
	out, err := l.readSegment(st, st.find(offset), offset, maxBytes, true, maxRecords)
	// Go on into the next segments while whole batches fit (and records
	// are wanted).
	for i := st.find(offset) + 1; err == nil && i < st.n(); i++ {
		prev := st.at(i - 1)
		left := maxBytes - len(out)
		if left < headerSize || len(out) == 0 || endOf(out) != prev.end {
			break
		}
		wanted := 0
		if maxRecords > 0 {
			if wanted = maxRecords - int(prev.end-offset); wanted <= 0 {
				break
			}
		}
		more, err2 := l.readSegment(st, i, st.at(i).seg.base(), left, false, wanted)
		if err2 != nil || len(more) == 0 {
			break // the next Read reports it
		}
		out = append(out, more...)
	}
	return out, err
}

// recordsEnd returns a position of v's data that the batch holding offset
// last ends at or before: the first batch the index lists past it starts
// there. Without such an entry (or without the index), the view's end. h
// is the batch at pos.
func recordsEnd(v *segView, pos int64, h header, last int64, useIndex bool) int64 {
	base := v.seg.base()
	if last < h.nextOffset() {
		return pos + h.size // the first batch holds them
	}
	if !useIndex || last-base > math.MaxUint32 {
		return v.size
	}
	ix := v.seg.idx.Load()
	k := ix.visible(v.size)
	if j := ix.floorOffset(uint32(last-base), k) + 1; j < k {
		if _, p := ix.entry(j); p > pos {
			return p
		}
	}
	return v.size
}

// endOf returns the offset after the last of the whole batches in b, or -1.
func endOf(b []byte) int64 {
	var next int64 = -1
	for len(b) >= headerSize {
		h := parseHeader(b)
		next = h.nextOffset()
		b = b[h.size:]
	}
	return next
}

// readSegment reads from segment i of st, rebuilding a damaged index of a
// closed segment.
func (l *Log) readSegment(st *state, i int, offset int64, maxBytes int, atLeastOne bool, maxRecords int) ([]byte, error) {
	v := st.at(i)
	useIndex, rebuilt := true, false
	for {
		b, err := readAt(v, offset, maxBytes, atLeastOne, useIndex, maxRecords)
		if !errors.Is(err, errIndexMismatch) {
			return b, err
		}
		if i == len(st.closed) || rebuilt {
			// The appender owns the active index: do without it.
			useIndex = false
			continue
		}
		if err := rebuildIndex(v, l.opts.IndexIntervalBytes); err != nil {
			return nil, err
		}
		rebuilt = true
	}
}

// readAt reads from one segment view (see Read).
func readAt(v *segView, offset int64, maxBytes int, atLeastOne, useIndex bool, maxRecords int) ([]byte, error) {
	base := v.seg.base()
	pos, h, err := locate(v, offset, useIndex)
	if err != nil {
		return nil, err
	}
	if !atLeastOne && h.size > int64(maxBytes) {
		return nil, nil
	}
	n := min(max(h.size, int64(maxBytes)), v.size-pos)
	if maxRecords > 0 {
		n = min(n, max(h.size, recordsEnd(v, pos, h, offset+int64(maxRecords)-1, useIndex)-pos))
	}
	buf := make([]byte, n)
	if err := readFull(v.seg.data, buf, pos); err != nil {
		return nil, fmt.Errorf("log: read segment %d: %w", base, err)
	}
	p, next := int64(0), h.baseOffset
	for p+headerSize <= n {
		hh := parseHeader(buf[p:])
		bad := hh.checkStored(buf[p+offMagic], v.seg.meta.compacted)
		switch {
		case bad != "":
		case hh.baseOffset != next:
			bad = fmt.Sprintf("baseOffset %d, want %d", hh.baseOffset, next)
		case p+hh.size > n:
			if p == 0 {
				bad = "batch runs past the end of the segment"
			}
		case batchCRC(buf[p:p+hh.size]) != hh.crc:
			bad = "CRC mismatch"
		}
		if bad != "" && p == 0 {
			return nil, corrupt(base, pos, "%s", bad)
		}
		if bad != "" || p+hh.size > n {
			break
		}
		p += hh.size
		next = hh.nextOffset()
	}
	return buf[:p:p], nil
}

// locate finds the batch holding offset in v: its position and header.
func locate(v *segView, offset int64, useIndex bool) (int64, header, error) {
	base := v.seg.base()
	pos, next := int64(0), base
	fromIndex := false
	if useIndex {
		ix := v.seg.idx.Load()
		if j := ix.floorOffset(uint32(offset-base), ix.visible(v.size)); j >= 0 {
			rel, p := ix.entry(j)
			pos, next, fromIndex = p, base+int64(rel), true
		}
	}
	r := segReader(v.seg, v.size, locateWindow)
	for {
		h, err := batchAt(r, base, pos, next)
		if err != nil {
			if fromIndex && errors.As(err, new(*CorruptionError)) {
				return 0, header{}, errIndexMismatch
			}
			return 0, header{}, err
		}
		fromIndex = false
		if offset < h.nextOffset() {
			return pos, h, nil
		}
		pos, next = pos+h.size, h.nextOffset()
	}
}

// batchAt reads and checks the framing of the header of the batch at pos,
// which should hold offset next and lie within r.limit.
func batchAt(r *reader, base, pos, next int64) (header, error) {
	if pos+headerSize > r.limit {
		return header{}, corrupt(base, pos, "incomplete batch header")
	}
	hb, err := r.peek(pos, headerSize)
	if err != nil {
		return header{}, fmt.Errorf("log: read segment %d: %w", base, err)
	}
	h := parseHeader(hb)
	if bad := h.checkStored(hb[offMagic], r.compacted); bad != "" {
		return header{}, corrupt(base, pos, "%s", bad)
	}
	if h.baseOffset != next {
		return header{}, corrupt(base, pos, "baseOffset %d, want %d", h.baseOffset, next)
	}
	if pos+h.size > r.limit {
		return header{}, corrupt(base, pos, "incomplete batch")
	}
	return h, nil
}

// rebuildIndex rebuilds a closed segment's index from its data file, for a
// reader that found it damaged. Close persists it.
func rebuildIndex(v *segView, interval int) error {
	base := v.seg.base()
	ix := &index{}
	b := newIndexBuilder(interval)
	res, err := walk(segReader(v.seg, v.size, scanWindow), base, 0, base, math.MaxInt64, &b, ix)
	if err != nil {
		return fmt.Errorf("log: read segment %d: %w", base, err)
	}
	if res.stop != "" || res.end != v.size {
		return corrupt(base, res.end, "%s", res.stop)
	}
	v.seg.idx.Store(ix)
	v.seg.indexDirty.Store(true)
	return nil
}

// OffsetForTime returns the base offset of the first batch whose
// maxTimestamp is >= tsMillis, or EndOffset if there is none. The batch it
// names has passed its CRC check.
func (l *Log) OffsetForTime(tsMillis int64) (int64, error) {
	l.filesMu.RLock()
	defer l.filesMu.RUnlock()
	st := l.state.Load()
	if st.shut {
		return 0, ErrClosed
	}
	for i := range st.n() {
		v := st.at(i)
		if v.size == 0 || v.maxTs < tsMillis {
			continue
		}
		useIndex, rebuilt := true, false
		for {
			off, found, err := searchTime(v, tsMillis, useIndex)
			if errors.Is(err, errIndexMismatch) {
				if i == len(st.closed) || rebuilt {
					useIndex = false
				} else if err := rebuildIndex(v, l.opts.IndexIntervalBytes); err != nil {
					return 0, err
				}
				rebuilt = true
				continue
			}
			if err != nil || found {
				return off, err
			}
			break
		}
	}
	return st.end(), nil
}

// searchTime finds the first batch of v whose maxTimestamp is >= ts.
func searchTime(v *segView, ts int64, useIndex bool) (int64, bool, error) {
	base := v.seg.base()
	r := segReader(v.seg, v.size, locateWindow)
	pos, next := int64(0), base
	if useIndex {
		ix := v.seg.idx.Load()
		if j := ix.floorTime(ts, ix.visible(v.size)); j >= 0 {
			rel, p := ix.entry(j)
			h, err := batchAt(r, base, p, base+int64(rel))
			if errors.As(err, new(*CorruptionError)) || err == nil && h.maxTs > ix.maxTs(j) {
				return 0, false, errIndexMismatch
			}
			if err != nil {
				return 0, false, err
			}
			pos, next = p, base+int64(rel)
		}
	}
	for pos < v.size {
		h, err := batchAt(r, base, pos, next)
		if err != nil {
			return 0, false, err
		}
		if h.maxTs >= ts {
			bb, err := r.peek(pos, h.size)
			if err != nil {
				return 0, false, fmt.Errorf("log: read segment %d: %w", base, err)
			}
			if batchCRC(bb) != h.crc {
				return 0, false, corrupt(base, pos, "CRC mismatch")
			}
			return h.baseOffset, true, nil
		}
		pos, next = pos+h.size, h.nextOffset()
	}
	return 0, false, nil
}
