package dedup

import "hash/maphash"

// Index layout.
const (
	bucketSlots = 8 // 64 bytes: one cache line
	ovfBit      = uint64(1) << 63
	tagBits     = uint64(0x7fffffff) << 32
	seqBits     = uint64(0xffffffff)
)

func (w *Window) hash(key string) uint64 { return maphash.String(w.seed, key) & w.hashMask }

// recHash is hash of r's key, read in place.
func (w *Window) recHash(r *entryRec) uint64 {
	return maphash.Bytes(w.seed, w.keyBytes(r)) & w.hashMask
}

// slotSeq returns the sequence a live index slot points at. Slots hold its
// low 32 bits; the ring spans less than 2^32 sequences, all in [head, tail).
func (w *Window) slotSeq(slot uint64) uint64 {
	return w.tail - uint64(uint32(w.tail)-uint32(slot)) // tail - (tail-seq mod 2^32)
}

// live reports whether an index slot's sequence is in the ring. Callers
// test for an empty slot first: its sequence, 0 in the low 32 bits, may be
// in the ring, but only ever as a dead placeholder (pushLocked).
func (w *Window) live(slot uint64) bool {
	d := uint64(uint32(w.tail) - uint32(slot)) // tail - seq
	return d-1 < w.tail-w.head                 // 1 ≤ d ≤ tail-head
}

// homeBucket returns the first slot of the bucket where hash h belongs.
func (w *Window) homeBucket(h uint64) uint64 {
	return (h >> 32) * bucketSlots & uint64(len(w.index)-1)
}

// slotTag is the part of hash h an index slot holds.
func slotTag(h uint64) uint64 { return h << 32 & tagBits }

// find looks key (with hash h) up in the index: the position of the live
// slot pointing at its entry, or -1.
func (w *Window) find(key string, h uint64) int {
	if len(w.index) == 0 {
		return -1
	}
	mask, tag := uint64(len(w.index)-1), slotTag(h)
	b := w.homeBucket(h)
	for range len(w.index) / bucketSlots { // every bucket at most once, were all marked
		for i := b; i < b+bucketSlots; i++ {
			if slot := w.index[i]; slot&tagBits == tag && w.live(slot) && w.keyIs(w.rec(w.slotSeq(slot)), key) {
				return int(i)
			}
		}
		if w.index[b]&ovfBit == 0 {
			break
		}
		b = (b + bucketSlots) & mask
	}
	return -1
}

// place puts slot (for a key not in the index, with hash h) in the first
// empty or stale slot from its home bucket on, marking every full bucket
// it passes as overflowed. The index is at load ≤ 1/4, so one exists.
func (w *Window) place(slot, h uint64) {
	mask := uint64(len(w.index) - 1)
	for b := w.homeBucket(h); ; b = (b + bucketSlots) & mask {
		for i := b; i < b+bucketSlots; i++ {
			if s := w.index[i] &^ ovfBit; s == 0 || !w.live(s) {
				w.index[i] = slot | w.index[i]&ovfBit
				return
			}
		}
		w.index[b] |= ovfBit
	}
}

// hashKeysLocked hashes keys into w.hashes and loads each one's home index
// bucket, so the probes that follow hit the cache. The loads run in a loop
// of a few instructions after all the hashing, so many are in flight at
// once and their cache misses overlap (BenchmarkDedupApplyAtBound/cold
// measures the path with cold caches).
func (w *Window) hashKeysLocked(keys []Key) []uint64 {
	w.hashes = w.hashes[:0]
	for _, k := range keys {
		w.hashes = append(w.hashes, w.hash(k.Key))
	}
	if len(w.index) > 0 {
		var sink uint64
		for _, h := range w.hashes {
			sink += w.index[w.homeBucket(h)]
		}
		w.sink = sink
	}
	return w.hashes
}

// sweepLocked empties the index's stale slots and recomputes the overflow
// marks. A slot out of its home bucket lies just past a marked bucket (the
// insert that put it there marked every bucket it passed), so only the
// buckets after marked ones need their slots' keys hashed again.
func (w *Window) sweepLocked() {
	w.sinceSweep = 0
	mask := uint64(len(w.index) - 1)
	var after []uint64 // buckets following a marked one
	for b := uint64(0); b < uint64(len(w.index)); b += bucketSlots {
		if w.index[b]&ovfBit != 0 {
			after = append(after, (b+bucketSlots)&mask)
		}
		for i := b; i < b+bucketSlots; i++ {
			if s := w.index[i] &^ ovfBit; s != 0 && w.live(s) {
				w.index[i] = s
			} else {
				w.index[i] = 0
			}
		}
	}
	for _, b := range after {
		for i := b; i < b+bucketSlots; i++ {
			s := w.index[i] &^ ovfBit
			if s == 0 {
				continue
			}
			for home := w.homeBucket(w.recHash(w.rec(w.slotSeq(s)))); home != b; home = (home + bucketSlots) & mask {
				w.index[home] |= ovfBit
			}
		}
	}
}

// resizeIndexLocked rebuilds the index with n slots from the ring.
func (w *Window) resizeIndexLocked(n int) {
	w.index, w.sinceSweep = make([]uint64, n), 0
	for s := w.head; s < w.tail; s++ {
		if r := w.rec(s); !r.dead {
			h := w.recHash(r)
			w.place(slotTag(h)|s&seqBits, h)
		}
	}
}
