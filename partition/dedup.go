package partition

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/zeebo/xxh3"

	"github.com/logd-dev/logd/internal/varint"
)

// Digest identifies a record's payload for idempotency: the 128-bit XXH3
// hash of its key, value and headers, each framed with its length, null
// and empty kept apart. XXH3 is not a cryptographic hash: two payloads
// differ in digest except with probability ~2^-128, which is what a retry
// check needs; a producer able to search for collisions can already send
// any payload under its own keys.
type Digest [16]byte

// RecordDigest computes the Digest of a record's payload. Header order
// matters, as it does on the wire.
func RecordDigest(key, value []byte, headers func(yield func(k string, v []byte) bool)) Digest {
	return NewDigester().Digest(key, value, headers)
}

// Digester computes record digests, reusing its buffer; one goroutine at
// a time.
type Digester struct {
	buf   []byte
	yield func(k string, v []byte) bool
}

// NewDigester returns a Digester.
func NewDigester() *Digester {
	dg := &Digester{}
	dg.yield = func(k string, v []byte) bool {
		dg.buf = appendDigestField(dg.buf, k, false)
		dg.buf = appendDigestField(dg.buf, v, v == nil)
		return true
	}
	return dg
}

// appendDigestField frames one field: 0 for null, else 1, the length as 8
// big-endian bytes, and the bytes.
func appendDigestField[T string | []byte](b []byte, f T, null bool) []byte {
	if null {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.BigEndian.AppendUint64(b, uint64(len(f)))
	return append(b, f...)
}

// Digest is RecordDigest with the Digester's reused buffer: the framed
// fields are laid out in one buffer and hashed at once, which for small
// records is several times faster than feeding a streaming hash.
func (dg *Digester) Digest(key, value []byte, headers func(yield func(k string, v []byte) bool)) Digest {
	dg.buf = appendDigestField(dg.buf[:0], key, key == nil)
	dg.buf = appendDigestField(dg.buf, value, value == nil)
	if headers != nil {
		headers(dg.yield)
	}
	return xxh3.Hash128(dg.buf).Bytes()
}

// DedupEntry is what a window remembers of one idempotency key: the
// payload's digest and where the record was appended.
type DedupEntry struct {
	Digest    Digest `json:"digest"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	// Expires is when the key leaves the window (Unix nanoseconds of the
	// command time): the window is [appended, Expires).
	Expires int64 `json:"expires"`
}

// DedupKey is one key with its entry, for snapshots and inserts.
type DedupKey struct {
	Key string `json:"key"`
	DedupEntry
}

// DedupWindow holds a topic's idempotency keys for a time window, bounded
// in number. Time is passed in (the replicated command time), never read
// from a clock, so every replica holds the same keys.
//
// At the bound, inserting a key evicts the oldest one before its window
// ends: a retry of an evicted key is appended again. Evictions are counted
// so an operator can see the window is too small for the key rate.
//
// Layout, chosen so that a new key in a full window costs one random
// memory access (its index bucket) and the garbage collector never scans
// the window:
//   - entries live in a ring in insertion (hence, while the window length
//     is unchanged, expiry) order, numbered by a sequence; expiry and
//     eviction pop its front;
//   - key bytes live in a FIFO arena of 64 KiB blocks in the same order;
//   - an open-addressing index maps a hash of the key to its entry's
//     sequence. It is made of buckets of 8 slots, one cache line each, and
//     kept at load ≤ 1/4, so a key is nearly always in its home bucket. A
//     lookup compares the key bytes, so distinct keys never share an entry.
//
// Deletion from the index is lazy: a slot whose sequence the ring has
// popped is stale, and an insert may reuse it, so expiry and eviction never
// touch the index (before, evicting the oldest key cost a second random
// access, about 40% of the window's time per key). A bucket found full of
// live slots by an insert is marked as overflowed, and lookups go on to
// the next bucket only past a marked one. Every len(index) inserts a sweep
// empties stale slots and recomputes the marks; it also keeps a stale
// slot from outliving 2^32 sequences, after which its 32 bits of sequence
// would name a live entry again.
//
// The index buckets a command will touch are loaded first, all at once,
// so the processor overlaps their cache misses (hashKeysLocked).
//
// The ring and the arena are queues of fixed-size chunks and blocks, made
// and dropped one at a time: no change of the window moves or reallocates
// more than one block, whatever its size (a growing or compacted arena of
// 2M keys stalled the state machine for 25 to 80 ms per copy). An entry and
// its key bytes are written once, when pushed (a dead mark excepted), so a
// snapshot can freeze the window in O(keys/1024) and encode it later, off
// the state machine's goroutine, while the window changes (View). A dead
// mark on a chunk a view may be reading copies the chunk first, and chunks
// and blocks a view may read are not reused.
//
// Changes (Admit, InsertAll, Expire) take the write lock once per batch;
// reads (Lookup, Stats, Keys, KeysAt) take the read lock; View takes the
// write lock for a moment.
type DedupWindow struct {
	mu sync.RWMutex
	// Guarded by mu:
	seed maphash.Seed
	// hashMask is ANDed into every key hash: all ones, except in tests
	// that crowd keys into few buckets.
	hashMask uint64
	// index slots hold 31 bits of the key's hash (tagBits) above the low 32
	// bits of its sequence; a slot with neither is empty. Bit 63 of a
	// bucket's first slot marks the bucket as overflowed (ovfBit). The
	// length is a power of two of at least bucketSlots, or 0.
	index      []uint64
	sinceSweep int // inserts since the last sweep
	ring
	// arenaTail is the absolute arena offset the next key's bytes go to.
	arenaTail uint64
	// spare and spareBlock were dropped while no view was outstanding;
	// the next push that needs a chunk or a block reuses them.
	spare      *recChunk
	spareBlock *arenaBlock
	maxKeys    int
	evicted    uint64
	expired    uint64
	// views counts views not yet released; viewEpoch counts views taken.
	// A chunk made at an earlier epoch than viewEpoch may be read by an
	// outstanding view.
	views     atomic.Int64
	viewEpoch uint64
	// hashes is hashKeysLocked's scratch; sink keeps its loads from being
	// optimized away.
	hashes []uint64
	sink   uint64
}

// Index layout.
const (
	bucketSlots = 8 // 64 bytes: one cache line
	ovfBit      = uint64(1) << 63
	tagBits     = uint64(0x7fffffff) << 32
	seqBits     = uint64(0xffffffff)
)

// ring is the part of a window a view freezes: the entries in sequence
// order and their keys' bytes.
type ring struct {
	// chunks[i] holds sequences from (firstChunk+i)<<chunkBits on.
	chunks     []*recChunk
	firstChunk uint64
	head       uint64 // sequence of the oldest entry in the ring
	tail       uint64 // sequence the next entry gets
	count      int    // live keys
	// blocks[i] holds arena offsets from (firstBlock+i)<<blockBits on. A
	// key never spans two blocks.
	blocks     []*arenaBlock
	firstBlock uint64
}

// chunkBits sizes ring chunks: 1024 entries, 56 KiB.
const chunkBits = 10

// blockBits sizes arena blocks: 64 KiB, so a key (at most 1 KiB) wastes
// at most 1.6% of one at a block's end.
const blockBits = 16

type arenaBlock [1 << blockBits]byte

// recChunk is one chunk of the ring; epoch is the window's viewEpoch when
// it was made.
type recChunk struct {
	recs  [1 << chunkBits]dedupRec
	epoch uint64
}

// dedupRec is one ring entry. An entry is dead once its key was inserted
// again (after its window ended but before it reached the ring's front);
// the index no longer points at it.
type dedupRec struct {
	DedupEntry
	keyOff uint64 // absolute offset in the arena
	keyLen uint32
	dead   bool
}

// NewDedupWindow returns an empty window holding at most maxKeys keys
// (at least 1).
func NewDedupWindow(maxKeys int) *DedupWindow { return newDedupWindowAt(maxKeys, 1) }

// newDedupWindowAt starts the sequence at seq (tests start it near a
// 32-bit wrap).
func newDedupWindowAt(maxKeys int, seq uint64) *DedupWindow {
	w := &DedupWindow{seed: maphash.MakeSeed(), hashMask: ^uint64(0), maxKeys: max(maxKeys, 1)}
	w.head, w.tail, w.firstChunk = seq, seq, seq>>chunkBits
	return w
}

func (w *DedupWindow) hash(key string) uint64 { return maphash.String(w.seed, key) & w.hashMask }

// recHash is hash of r's key, read in place.
func (w *DedupWindow) recHash(r *dedupRec) uint64 {
	return maphash.Bytes(w.seed, w.keyBytes(r)) & w.hashMask
}

// rec returns the entry of sequence seq, in [head, tail).
func (g *ring) rec(seq uint64) *dedupRec {
	return &g.chunks[seq>>chunkBits-g.firstChunk].recs[seq&(1<<chunkBits-1)]
}

// keyBytes returns r's key, in place in the arena.
func (g *ring) keyBytes(r *dedupRec) []byte {
	off := r.keyOff & (1<<blockBits - 1)
	return g.blocks[r.keyOff>>blockBits-g.firstBlock][off : off+uint64(r.keyLen)]
}

// slotSeq returns the sequence a live index slot points at. Slots hold its
// low 32 bits; the ring spans less than 2^32 sequences, all in [head, tail).
func (w *DedupWindow) slotSeq(slot uint64) uint64 {
	return w.tail - uint64(uint32(w.tail)-uint32(slot)) // tail - (tail-seq mod 2^32)
}

// live reports whether an index slot's sequence is in the ring. Callers
// test for an empty slot first: its sequence, 0 in the low 32 bits, may be
// in the ring, but only ever as a dead placeholder (pushLocked).
func (w *DedupWindow) live(slot uint64) bool {
	d := uint64(uint32(w.tail) - uint32(slot)) // tail - seq
	return d-1 < w.tail-w.head                 // 1 ≤ d ≤ tail-head
}

// homeBucket returns the first slot of the bucket where hash h belongs.
func (w *DedupWindow) homeBucket(h uint64) uint64 {
	return (h >> 32) * bucketSlots & uint64(len(w.index)-1)
}

// slotTag is the part of hash h an index slot holds.
func slotTag(h uint64) uint64 { return h << 32 & tagBits }

func (w *DedupWindow) keyIs(r *dedupRec, key string) bool {
	return int(r.keyLen) == len(key) && string(w.keyBytes(r)) == key // no allocation
}

func (w *DedupWindow) keyOf(r *dedupRec) string { return string(w.keyBytes(r)) }

// find looks key (with hash h) up in the index: the position of the live
// slot pointing at its entry, or -1.
func (w *DedupWindow) find(key string, h uint64) int {
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
func (w *DedupWindow) place(slot, h uint64) {
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

// SetMaxKeys changes the bound; extra keys are evicted at the next Insert.
func (w *DedupWindow) SetMaxKeys(n int) {
	w.mu.Lock()
	w.maxKeys = max(n, 1)
	w.mu.Unlock()
}

// Lookup returns the entry for key if it is in the window at time now.
func (w *DedupWindow) Lookup(key string, now int64) (DedupEntry, bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.lookup(key, w.hash(key), now)
}

func (w *DedupWindow) lookup(key string, h uint64, now int64) (DedupEntry, bool) {
	at := w.find(key, h)
	if at < 0 {
		return DedupEntry{}, false
	}
	r := w.rec(w.slotSeq(w.index[at]))
	if r.Expires <= now {
		return DedupEntry{}, false
	}
	return r.DedupEntry, true
}

// Admit inserts keys at time now, as InsertAll does, unless one of them is
// in the window at now: then it changes nothing and returns that key (the
// first such) and false. Empty keys are ignored. This is the state
// machine's path for an append: one lock, and each key hashed once.
func (w *DedupWindow) Admit(now int64, keys []DedupKey) (held string, admitted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	hashes := w.hashKeysLocked(keys)
	for i, h := range hashes {
		if k := keys[i].Key; k != "" {
			if _, ok := w.lookup(k, h, now); ok {
				return k, false
			}
		}
	}
	w.insertAllLocked(now, keys, hashes)
	return "", true
}

// hashKeysLocked hashes keys into w.hashes and loads each one's home index
// bucket, so the probes that follow hit the cache. The loads run in a loop
// of a few instructions after all the hashing, so many are in flight at
// once and their cache misses overlap (at the bound of 100k keys with cold
// caches: 104 ns per key admitted against 141 with hashing between them).
func (w *DedupWindow) hashKeysLocked(keys []DedupKey) []uint64 {
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

// Insert records key at time now, first dropping expired keys and, at the
// bound, the oldest keys. A key already present is replaced (callers only
// insert keys Lookup did not find).
func (w *DedupWindow) Insert(key string, e DedupEntry, now int64) {
	w.InsertAll(now, []DedupKey{{Key: key, DedupEntry: e}})
}

// InsertAll is Insert for each of keys in order, under one lock; empty keys
// are ignored.
func (w *DedupWindow) InsertAll(now int64, keys []DedupKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.insertAllLocked(now, keys, w.hashKeysLocked(keys))
}

func (w *DedupWindow) insertAllLocked(now int64, keys []DedupKey, hashes []uint64) {
	for i, k := range keys {
		if k.Key == "" {
			continue
		}
		w.expireLocked(now) // evicting may bring expired keys to the front
		for w.count >= w.maxKeys && w.popOldestLocked() {
			w.evicted++
		}
		w.insertLocked(k.Key, hashes[i], k.DedupEntry)
	}
}

func (w *DedupWindow) insertLocked(key string, h uint64, e DedupEntry) {
	if w.tail-w.head >= uint64(2*w.count+1024) {
		// Dead entries (keys inserted again) pile up behind a long-lived
		// front entry only after the window was shortened; drop them.
		w.rebuildLocked()
	}
	if (w.count+1)*4 > len(w.index) {
		// At load ≤ 1/4 a bucket of 8 is nearly never full, so a key is
		// found or placed in its home bucket: one cache line.
		w.resizeIndexLocked(max(2*len(w.index), 8*bucketSlots))
	} else if w.sinceSweep >= len(w.index) {
		w.sweepLocked()
	}
	w.sinceSweep++
	at := w.find(key, h)
	seq := w.pushLocked(dedupRec{DedupEntry: e, keyOff: w.appendKeyLocked(key), keyLen: uint32(len(key))})
	slot := slotTag(h) | seq&seqBits
	if at >= 0 {
		w.markDeadLocked(w.slotSeq(w.index[at]))
		w.index[at] = slot | w.index[at]&ovfBit
		return
	}
	w.place(slot, h)
	w.count++
}

// appendKeyLocked copies key to the arena's tail and returns its offset. A
// key that does not fit in the last block starts the next one. It writes
// only past the tail, which no view reads.
func (w *DedupWindow) appendKeyLocked(key string) uint64 {
	if w.arenaTail&(1<<blockBits-1)+uint64(len(key)) > 1<<blockBits {
		w.arenaTail = (w.arenaTail>>blockBits + 1) << blockBits
	}
	i := w.arenaTail>>blockBits - w.firstBlock
	if i == uint64(len(w.blocks)) {
		b := w.spareBlock
		if w.spareBlock = nil; b == nil {
			b = new(arenaBlock)
		}
		w.blocks = append(w.blocks, b)
	}
	off := w.arenaTail
	copy(w.blocks[i][off&(1<<blockBits-1):], key)
	w.arenaTail += uint64(len(key))
	return off
}

// markDeadLocked marks the entry of seq dead, first copying its chunk if
// an outstanding view may be reading it.
func (w *DedupWindow) markDeadLocked(seq uint64) {
	i := seq>>chunkBits - w.firstChunk
	if c := w.chunks[i]; c.epoch < w.viewEpoch && w.views.Load() > 0 {
		cp := new(recChunk)
		*cp = *c
		cp.epoch = w.viewEpoch
		w.chunks[i] = cp
	}
	w.rec(seq).dead = true
}

// pushLocked appends r to the ring and returns its sequence, which is never
// 0 in its low 32 bits (so an index slot is never empty). It writes only
// past the tail, which no view reads.
func (w *DedupWindow) pushLocked(r dedupRec) uint64 {
	for {
		if w.tail>>chunkBits-w.firstChunk == uint64(len(w.chunks)) {
			c := w.spare
			if w.spare = nil; c == nil {
				c = new(recChunk)
			}
			c.epoch = w.viewEpoch
			w.chunks = append(w.chunks, c)
		}
		seq := w.tail
		w.tail++
		if uint32(seq) != 0 {
			*w.rec(seq) = r
			return seq
		}
		*w.rec(seq) = dedupRec{keyOff: r.keyOff, dead: true} // a placeholder
	}
}

// Expire drops keys whose window ended at or before now.
func (w *DedupWindow) Expire(now int64) {
	w.mu.Lock()
	w.expireLocked(now)
	w.mu.Unlock()
}

func (w *DedupWindow) expireLocked(now int64) {
	for w.head < w.tail {
		r := w.rec(w.head)
		if !r.dead {
			if r.Expires > now {
				// Insertion order is expiry order while the window length
				// is unchanged; a key inserted under a longer window may
				// hold shorter ones behind it until it expires, bounded by
				// maxKeys.
				return
			}
			w.expired++
		}
		w.popFrontLocked()
	}
}

// popOldestLocked removes the oldest live key; false if none.
func (w *DedupWindow) popOldestLocked() bool {
	for w.head < w.tail {
		live := !w.rec(w.head).dead
		w.popFrontLocked()
		if live {
			return true
		}
	}
	return false
}

// popFrontLocked drops the ring's front entry, which makes its index slot
// stale, and drops the chunk and the arena blocks no entry needs any more.
// It writes nothing a view may read: what it drops is kept for reuse only
// if no view is outstanding.
func (w *DedupWindow) popFrontLocked() {
	r := w.rec(w.head)
	if !r.dead {
		w.count--
	}
	// Keys are in the arena in sequence order: every byte before this
	// entry's key's end is released.
	keyEnd := r.keyOff + uint64(r.keyLen)
	w.head++
	reuse := w.views.Load() == 0
	if w.head>>chunkBits != w.firstChunk {
		if reuse {
			w.spare = w.chunks[0]
		}
		w.chunks[0] = nil
		w.chunks = w.chunks[1:]
		w.firstChunk++
	}
	for keyEnd>>blockBits > w.firstBlock && len(w.blocks) > 1 {
		if reuse {
			w.spareBlock = w.blocks[0]
		}
		w.blocks[0] = nil
		w.blocks = w.blocks[1:]
		w.firstBlock++
	}
}

// sweepLocked empties the index's stale slots and recomputes the overflow
// marks. A slot out of its home bucket lies just past a marked bucket (the
// insert that put it there marked every bucket it passed), so only the
// buckets after marked ones need their slots' keys hashed again.
func (w *DedupWindow) sweepLocked() {
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
func (w *DedupWindow) resizeIndexLocked(n int) {
	w.index, w.sinceSweep = make([]uint64, n), 0
	for s := w.head; s < w.tail; s++ {
		if r := w.rec(s); !r.dead {
			h := w.recHash(r)
			w.place(slotTag(h)|s&seqBits, h)
		}
	}
}

// rebuildLocked rebuilds the window from its live entries, in order.
func (w *DedupWindow) rebuildLocked() {
	live := w.keysLocked()
	w.index, w.count, w.chunks, w.head, w.firstChunk = nil, 0, nil, w.tail, w.tail>>chunkBits
	w.blocks, w.firstBlock, w.arenaTail = nil, 0, 0
	for _, k := range live {
		w.insertLocked(k.Key, w.hash(k.Key), k.DedupEntry)
	}
}

// DedupStats are a window's counters.
type DedupStats struct {
	Keys    int
	Evicted uint64
	Expired uint64
}

// Stats returns the number of keys held and the eviction and expiry
// counts since the window was made.
func (w *DedupWindow) Stats() DedupStats {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return DedupStats{Keys: w.count, Evicted: w.evicted, Expired: w.expired}
}

// Keys returns the live keys in insertion order, for a snapshot.
func (w *DedupWindow) Keys() []DedupKey {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.keysLocked()
}

func (w *DedupWindow) keysLocked() []DedupKey {
	out := make([]DedupKey, 0, w.count)
	for s := w.head; s < w.tail; s++ {
		if r := w.rec(s); !r.dead {
			out = append(out, DedupKey{Key: w.keyOf(r), DedupEntry: r.DedupEntry})
		}
	}
	return out
}

// appendKeys appends the live keys of sequences [from, to).
func (g *ring) appendKeys(b []byte, from, to uint64) []byte {
	for s := from; s < to; s++ {
		if r := g.rec(s); !r.dead {
			b = appendDedupKey(b, g.keyBytes(r), r.DedupEntry)
		}
	}
	return b
}

// encodedLen is the length of the ring's encoding (DedupView.WriteTo).
func (g *ring) encodedLen() int64 {
	n := int64(1 + varint.UvarintLen(uint64(g.count)))
	for s := g.head; s < g.tail; s++ {
		if r := g.rec(s); !r.dead {
			n += int64(varint.UvarintLen(uint64(r.keyLen))) + int64(r.keyLen) + int64(len(r.Digest)) +
				int64(varint.VarintLen(int64(r.Partition))+varint.VarintLen(r.Offset)+varint.VarintLen(r.Expires))
		}
	}
	return n
}

// DedupView is a window frozen at the moment View was called, for a
// snapshot: it reads memory the window no longer writes, so it may be
// encoded without the window's lock while the window changes. Release it
// when done; until then the window copies what it would overwrite.
type DedupView struct {
	g        ring
	w        *DedupWindow
	released atomic.Bool
}

// View freezes the window. It costs a copy of one pointer per 1024
// entries, so a snapshot holds the state machine up for microseconds, not
// for an encoding of every key.
func (w *DedupWindow) View() *DedupView {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.viewEpoch++
	w.views.Add(1)
	v := &DedupView{g: w.ring, w: w}
	v.g.chunks = slices.Clone(w.chunks)
	v.g.blocks = slices.Clone(w.blocks)
	return v
}

// Len is the length of the view's encoding: what WriteTo writes.
func (v *DedupView) Len() int64 { return v.g.encodedLen() }

// WriteTo writes the view's encoding (dedupEncodingVersion), through a small
// buffer, so a window of millions of keys needs no buffer of its size.
func (v *DedupView) WriteTo(dst io.Writer) (int64, error) {
	buf := make([]byte, 0, 64<<10)
	buf = append(buf, dedupEncodingVersion)
	buf = binary.AppendUvarint(buf, uint64(v.g.count))
	var n int64
	for s := v.g.head; ; {
		to := min(v.g.tail, s+64)
		buf = v.g.appendKeys(buf, s, to)
		s = to
		if len(buf) < 32<<10 && s < v.g.tail {
			continue
		}
		m, err := dst.Write(buf)
		n += int64(m)
		if err != nil {
			return n, fmt.Errorf("write idempotency window: %w", err)
		}
		if s == v.g.tail {
			return n, nil
		}
		buf = buf[:0]
	}
}

// Release ends the view; the window may then reuse what it froze. Later
// calls do nothing.
func (v *DedupView) Release() {
	if v.released.CompareAndSwap(false, true) {
		v.g = ring{}
		v.w.views.Add(-1)
	}
}

// KeysAt fills in, for each (partition, offset) of at, the key of the
// record appended there if that key is in the window at time now; others
// are left as they are. One pass over the window, allocating only the keys
// found.
func (w *DedupWindow) KeysAt(now int64, at map[[2]int64]string) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	for s := w.head; s < w.tail; s++ {
		r := w.rec(s)
		if r.dead || r.Expires <= now {
			continue
		}
		pos := [2]int64{int64(r.Partition), r.Offset}
		if _, ok := at[pos]; ok {
			at[pos] = w.keyOf(r)
		}
	}
}

// restore inserts keys into an empty window.
func (w *DedupWindow) restore(keys []DedupKey) {
	for _, k := range keys {
		w.insertLocked(k.Key, w.hash(k.Key), k.DedupEntry)
	}
}

// dedupEncodingVersion prefixes a window's encoding (DedupView.WriteTo,
// ReadDedupWindow): the version, the key count as a uvarint, then per key,
// oldest first, its length as a uvarint and its bytes, the digest, and
// partition, offset and expiry as varints.
const dedupEncodingVersion = 1

func appendDedupKey[T string | []byte](b []byte, key T, e DedupEntry) []byte {
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = append(b, e.Digest[:]...)
	b = binary.AppendVarint(b, int64(e.Partition))
	b = binary.AppendVarint(b, e.Offset)
	return binary.AppendVarint(b, e.Expires)
}

// ErrBadDedupEncoding means a window's encoding was damaged.
var ErrBadDedupEncoding = errors.New("partition: malformed idempotency window encoding")

// ReadDedupWindow decodes n bytes of a window's encoding from r straight
// into a new window holding at most maxKeys keys, so restoring a snapshot
// holds neither the section nor a table of its keys in memory (a window of
// millions of keys would need both at once, besides the window). n = 0 is
// an empty window.
func ReadDedupWindow(r io.Reader, n int64, maxKeys int) (*DedupWindow, error) {
	w := NewDedupWindow(maxKeys)
	if n == 0 {
		return w, nil
	}
	err := decodeDedup(r, n, func(key []byte, e DedupEntry) {
		w.insertLocked(string(key), maphash.Bytes(w.seed, key)&w.hashMask, e)
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// decodeDedup reads exactly n bytes of a window's encoding from r and
// calls fn for each key, oldest first; key is valid only during the call.
// A short or malformed encoding is ErrBadDedupEncoding; a failing r, its
// error.
func decodeDedup(r io.Reader, n int64, fn func(key []byte, e DedupEntry)) error {
	cr := &countingReader{r: bufio.NewReaderSize(io.LimitReader(r, n), 64<<10)}
	bad := func(what string, i uint64, err error) error {
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("read idempotency window: %w", err)
		}
		return fmt.Errorf("%w: %s %d", ErrBadDedupEncoding, what, i)
	}
	v, err := cr.ReadByte()
	if err != nil {
		return bad("version", 0, err)
	}
	if v != dedupEncodingVersion {
		return fmt.Errorf("%w: version %d", ErrBadDedupEncoding, v)
	}
	count, err := binary.ReadUvarint(cr)
	if err != nil || count > uint64(n) {
		return bad("key count", count, err)
	}
	var key []byte
	for i := uint64(0); i < count; i++ {
		kl, err := binary.ReadUvarint(cr)
		if err != nil || kl > uint64(n-cr.n) {
			return bad("key", i, err)
		}
		key = slices.Grow(key[:0], int(kl))[:kl]
		if _, err := io.ReadFull(cr, key); err != nil {
			return bad("key", i, err)
		}
		var e DedupEntry
		if _, err := io.ReadFull(cr, e.Digest[:]); err != nil {
			return bad("digest", i, err)
		}
		var vals [3]int64
		for j := range vals {
			if vals[j], err = binary.ReadVarint(cr); err != nil {
				return bad("entry", i, err)
			}
		}
		e.Partition, e.Offset, e.Expires = int32(vals[0]), vals[1], vals[2]
		fn(key, e)
	}
	if cr.n != n {
		return fmt.Errorf("%w: %d trailing bytes", ErrBadDedupEncoding, n-cr.n)
	}
	return nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	m, err := c.r.Read(p)
	c.n += int64(m)
	return m, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// ErrIdempotencyConflict means an idempotency key held in the window was
// sent again with a different payload. Nothing is appended.
var ErrIdempotencyConflict = errors.New("idempotency key reused with a different payload")

// MaxIdempotencyKeyBytes bounds an idempotency key.
const MaxIdempotencyKeyBytes = 1024
