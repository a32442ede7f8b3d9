package log

import (
	"fmt"
	"math"
)

// reader reads a data file through a window buffer, never past limit.
type reader struct {
	f      File
	limit  int64
	window int
	buf    []byte
	off    int64 // file position of buf[0]
	// compacted relaxes the record-count check (see header.checkStored).
	compacted bool
}

// segReader is a reader over a segment's data file.
func segReader(s *segment, limit int64, window int) *reader {
	return &reader{f: s.data, limit: limit, window: window, compacted: s.meta.compacted}
}

// peek returns n bytes at pos; the caller has checked pos+n <= limit. The
// slice is valid until the next peek.
func (r *reader) peek(pos int64, n int64) ([]byte, error) {
	if pos >= r.off && pos+n <= r.off+int64(len(r.buf)) {
		return r.buf[pos-r.off:][:n], nil
	}
	want := max(n, min(int64(r.window), r.limit-pos))
	if int64(cap(r.buf)) < want {
		r.buf = make([]byte, want)
	}
	r.buf = r.buf[:want]
	m, err := r.f.ReadAt(r.buf, pos)
	if int64(m) < n {
		r.buf = r.buf[:0]
		if err == nil {
			err = fmt.Errorf("short read at %d", pos)
		}
		return nil, err
	}
	r.buf, r.off = r.buf[:m], pos
	return r.buf[:n], nil
}

// walkResult describes a walk over a run of batches.
type walkResult struct {
	end     int64  // position after the last good batch
	next    int64  // offset after the last good batch
	batches int    // good batches walked
	last    header // the last good batch, if batches > 0
	stop    string // why the walk stopped before limit; "" if it reached limit
}

// walk reads batch headers from pos (where the batch with offset next starts)
// until limit, in a segment based at base, checking framing and dense offsets,
// and the CRC of every batch that ends after crcFrom. Each good batch is
// passed to b (which adds index entries to ix). It stops at the first bad
// batch. The error is an I/O error; damage is reported in stop.
func walk(r *reader, base, pos, next int64, crcFrom int64, b *indexBuilder, ix *index) (walkResult, error) {
	res := walkResult{end: pos, next: next}
	prevEpoch := uint32(0)
	for pos < r.limit {
		if pos+headerSize > r.limit {
			res.stop = "incomplete batch header"
			break
		}
		hb, err := r.peek(pos, headerSize)
		if err != nil {
			return res, err
		}
		h := parseHeader(hb)
		if reason := h.checkStored(hb[offMagic], r.compacted); reason != "" {
			res.stop = reason
			break
		}
		if h.baseOffset != next {
			res.stop = fmt.Sprintf("baseOffset %d, want %d", h.baseOffset, next)
			break
		}
		if pos+h.size > r.limit {
			res.stop = "incomplete batch"
			break
		}
		if h.nextOffset()-base > math.MaxUint32 {
			res.stop = "relative offset overflows uint32"
			break
		}
		if h.epoch < prevEpoch {
			res.stop = "applied index decreases"
			break
		}
		if pos+h.size > crcFrom {
			bb, err := r.peek(pos, h.size)
			if err != nil {
				return res, err
			}
			if batchCRC(bb) != h.crc {
				res.stop = "CRC mismatch"
				break
			}
		}
		if b != nil {
			b.add(ix, base, pos, h)
		}
		prevEpoch = h.epoch
		pos += h.size
		next = h.nextOffset()
		res.end, res.next, res.last = pos, next, h
		res.batches++
	}
	return res, nil
}

// validAt reports whether a whole valid batch (framing and CRC) with a
// baseOffset >= minOffset starts at pos.
func validAt(r *reader, pos, minOffset int64) (bool, error) {
	if pos+headerSize > r.limit {
		return false, nil
	}
	hb, err := r.peek(pos, headerSize)
	if err != nil {
		return false, err
	}
	if hb[offMagic] != batchMagic {
		return false, nil
	}
	h := parseHeader(hb)
	if h.checkStored(hb[offMagic], r.compacted) != "" || h.baseOffset < minOffset || pos+h.size > r.limit {
		return false, nil
	}
	bb, err := r.peek(pos, h.size)
	if err != nil {
		return false, err
	}
	return batchCRC(bb) == h.crc, nil
}

// validBatchAfter reports whether any whole valid batch starts after the bad
// batch at pos (which should have held offset next). It decides whether bad
// bytes at the end of the active segment are a torn tail (nothing valid after
// them) or corruption. It first tries where the bad batch's own length
// points, then every byte position: a rare path, linear in the tail.
func validBatchAfter(r *reader, pos, next int64) (bool, error) {
	if pos+headerSize <= r.limit {
		hb, err := r.peek(pos, headerSize)
		if err != nil {
			return false, err
		}
		if h := parseHeader(hb); h.size >= headerSize {
			if ok, err := validAt(r, pos+h.size, next); ok || err != nil {
				return ok, err
			}
		}
	}
	for q := pos + 1; q+headerSize <= r.limit; q++ {
		if ok, err := validAt(r, q, next); ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}
