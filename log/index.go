package log

import (
	"encoding/binary"
	"math"
	"sort"
)

// Sparse indexes. Every IndexIntervalBytes of data, the batch being appended
// gets one entry in each index file, so the two files have the same number of
// entries for the same batches:
//
//	.index      relative offset uint32, position uint32          (8 bytes)
//	.timeindex  max timestamp int64, relative offset uint32      (12 bytes)
//
// The relative offset is the batch's baseOffset minus the segment's base
// offset; the position is the byte position of the batch in the data file;
// the max timestamp is the largest batch maxTimestamp of the segment up to and
// including that batch (a running maximum, so it never decreases). Both files
// are big-endian, like the batches. The first batch of a segment is never
// indexed: position 0 is implied.
//
// The indexes are caches. They are kept whole in memory (20 bytes per entry,
// about 20/IndexIntervalBytes of the data size), checked on load (sizes,
// entry counts, strictly increasing offsets and positions, positions inside
// the data file, non-decreasing timestamps), and each entry a lookup uses is
// checked against the batch header it points at. A failed check rebuilds the
// index from the data file.
const (
	offEntrySize  = 8
	timeEntrySize = 12
)

// index is one segment's sparse indexes, in file format. An *index is never
// modified below its length once published: the appender publishes a new
// *index whose slices may share (and extend) the backing arrays.
type index struct {
	off []byte
	tim []byte
}

func (ix *index) n() int { return len(ix.off) / offEntrySize }

func (ix *index) entry(i int) (rel uint32, pos int64) {
	e := ix.off[i*offEntrySize:]
	return binary.BigEndian.Uint32(e), int64(binary.BigEndian.Uint32(e[4:]))
}

func (ix *index) maxTs(i int) int64 {
	return int64(binary.BigEndian.Uint64(ix.tim[i*timeEntrySize:]))
}

// visible returns how many leading entries point below size (the rest
// describe batches a reader's view does not include yet).
func (ix *index) visible(size int64) int {
	return sort.Search(ix.n(), func(i int) bool {
		_, pos := ix.entry(i)
		return pos >= size
	})
}

// floorOffset returns the last of the first k entries whose relative offset
// is <= rel, or -1.
func (ix *index) floorOffset(rel uint32, k int) int {
	return sort.Search(k, func(i int) bool {
		r, _ := ix.entry(i)
		return r > rel
	}) - 1
}

// floorTime returns the last of the first k entries whose running max
// timestamp is < ts, or -1. Every batch up to that entry's batch has a
// maxTimestamp < ts.
func (ix *index) floorTime(ts int64, k int) int {
	return sort.Search(k, func(i int) bool { return ix.maxTs(i) >= ts }) - 1
}

// loadIndex checks raw index files of a segment whose data file has size
// bytes. It returns nil if they are not plausible.
func loadIndex(off, tim []byte, size int64) *index {
	if len(off)%offEntrySize != 0 || len(tim)%timeEntrySize != 0 ||
		len(off)/offEntrySize != len(tim)/timeEntrySize {
		return nil
	}
	ix := &index{off: off, tim: tim}
	var prevRel uint32
	prevPos, prevTs := int64(0), int64(math.MinInt64)
	for i := range ix.n() {
		rel, pos := ix.entry(i)
		ts := ix.maxTs(i)
		if binary.BigEndian.Uint32(tim[i*timeEntrySize+8:]) != rel ||
			rel <= prevRel || pos <= prevPos || pos >= size || ts < prevTs {
			return nil
		}
		prevRel, prevPos, prevTs = rel, pos, ts
	}
	return ix
}

// indexBuilder decides where index entries go; the appender and every walk
// over a data file use it, so a rebuilt index equals the appended one.
type indexBuilder struct {
	interval int64
	since    int64 // data bytes since the last entry (or the segment start)
	maxTs    int64 // running max timestamp of the segment; MinInt64 if empty
}

func newIndexBuilder(interval int) indexBuilder {
	return indexBuilder{interval: int64(interval), maxTs: math.MinInt64}
}

// add accounts for the batch h at pos in a segment based at base, and
// appends index entries for it to ix when one is due. It reports whether it
// added an entry.
func (b *indexBuilder) add(ix *index, base, pos int64, h header) bool {
	b.maxTs = max(b.maxTs, h.maxTs)
	due := b.since >= b.interval && pos > 0
	if due {
		b.since = 0
		rel := uint32(h.baseOffset - base)
		ix.off = binary.BigEndian.AppendUint32(ix.off, rel)
		ix.off = binary.BigEndian.AppendUint32(ix.off, uint32(pos))
		ix.tim = binary.BigEndian.AppendUint64(ix.tim, uint64(b.maxTs))
		ix.tim = binary.BigEndian.AppendUint32(ix.tim, rel)
	}
	b.since += h.size
	return due
}
