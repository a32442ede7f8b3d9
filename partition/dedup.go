package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"

	"github.com/zeebo/xxh3"
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

// Digester computes record digests, reusing its hash state; one goroutine
// at a time.
type Digester struct{ h *xxh3.Hasher }

// NewDigester returns a Digester.
func NewDigester() *Digester { return &Digester{h: xxh3.New()} }

// Digest is RecordDigest with the Digester's reused state.
func (dg *Digester) Digest(key, value []byte, headers func(yield func(k string, v []byte) bool)) Digest {
	h := dg.h
	h.Reset()
	var n [9]byte
	frame := func(l int, null bool) {
		if null {
			n[0] = 0
			h.Write(n[:1])
			return
		}
		n[0] = 1
		binary.BigEndian.PutUint64(n[1:], uint64(l))
		h.Write(n[:])
	}
	frame(len(key), key == nil)
	h.Write(key)
	frame(len(value), value == nil)
	h.Write(value)
	if headers != nil {
		headers(func(k string, v []byte) bool {
			frame(len(k), false)
			h.WriteString(k)
			frame(len(v), v == nil)
			h.Write(v)
			return true
		})
	}
	return h.Sum128().Bytes()
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
// Layout, chosen so that a new key costs one random memory access and the
// garbage collector never scans the window:
//   - entries live in a ring in insertion (hence, while the window length
//     is unchanged, expiry) order, numbered by a sequence; expiry and
//     eviction pop its front, and that is all they do;
//   - key bytes live in a FIFO arena in the same order;
//   - an open-addressing index (linear probing) maps a hash of the key to
//     its entry's sequence. A lookup compares the key bytes, so distinct
//     keys never share an entry. A slot whose sequence has left the ring is
//     stale: lookups skip it, inserts reuse it, and a sequential sweep
//     clears the rest once they fill an eighth of the index.
//
// The writer (the FSM goroutine) may read without the lock; it takes the
// write lock to change anything, once per batch. Other goroutines read
// under the read lock.
type DedupWindow struct {
	mu sync.RWMutex
	// Guarded by mu:
	seed maphash.Seed
	// index slots hold the low 32 bits of the key's hash (which give its
	// home slot) above the low 32 bits of its sequence; 0 is empty. The
	// length is a power of two, or 0.
	index []uint64
	count int // live keys
	stale int // index slots whose entry left the ring
	// sweptAt is the tail when stale slots were last all cleared.
	sweptAt uint64
	ring    []dedupRec // len a power of two; seq s at ring[s&(len-1)]
	head    uint64     // sequence of the oldest entry in the ring
	tail    uint64     // sequence the next entry gets
	// arena holds key bytes; arenaBase is the absolute offset of arena[0]
	// and arenaHead the absolute offset of the oldest byte still needed.
	arena     []byte
	arenaBase uint64
	arenaHead uint64
	maxKeys   int
	evicted   uint64
	expired   uint64
	// hashes is FirstHeld's scratch; sink keeps its loads from being
	// optimized away.
	hashes []uint64
	sink   uint64
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
	return &DedupWindow{seed: maphash.MakeSeed(), head: seq, tail: seq, sweptAt: seq, maxKeys: max(maxKeys, 1)}
}

func (w *DedupWindow) rec(seq uint64) *dedupRec { return &w.ring[seq&uint64(len(w.ring)-1)] }

// liveSeq returns the sequence an index slot points at, if it is still in
// the ring. Slot sequences are the low 32 bits; the ring spans less than
// 2^32 and stale slots are swept long before they could be mistaken.
func (w *DedupWindow) liveSeq(slot uint64) (uint64, bool) {
	back := uint64(uint32(w.tail) - uint32(slot)) // tail - seq, mod 2^32
	if back == 0 || back > w.tail-w.head {
		return 0, false
	}
	return w.tail - back, true
}

func (w *DedupWindow) keyIs(r *dedupRec, key string) bool {
	if int(r.keyLen) != len(key) {
		return false
	}
	off := r.keyOff - w.arenaBase
	return string(w.arena[off:off+uint64(r.keyLen)]) == key // no allocation
}

func (w *DedupWindow) keyOf(r *dedupRec) string {
	off := r.keyOff - w.arenaBase
	return string(w.arena[off : off+uint64(r.keyLen)])
}

// probe looks key (with hash h) up in the index: the slot holding it, or
// -1, and the first empty or stale slot on its probe path (where an insert
// goes).
func (w *DedupWindow) probe(key string, h uint64) (at, free int) {
	free = -1
	if len(w.index) == 0 {
		return -1, -1
	}
	mask := uint64(len(w.index) - 1)
	tag := uint64(uint32(h)) << 32
	for i := h & mask; ; i = (i + 1) & mask {
		slot := w.index[i]
		if slot == 0 {
			if free < 0 {
				free = int(i)
			}
			return -1, free
		}
		seq, live := w.liveSeq(slot)
		switch {
		case !live:
			if free < 0 {
				free = int(i)
			}
		case slot&^0xffffffff == tag && w.keyIs(w.rec(seq), key):
			return int(i), free
		}
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
	return w.lookup(key, maphash.String(w.seed, key), now)
}

func (w *DedupWindow) lookup(key string, h uint64, now int64) (DedupEntry, bool) {
	at, _ := w.probe(key, h)
	if at < 0 {
		return DedupEntry{}, false
	}
	seq, _ := w.liveSeq(w.index[at])
	r := w.rec(seq)
	if r.Expires <= now {
		return DedupEntry{}, false
	}
	return r.DedupEntry, true
}

// FirstHeld returns the first of n keys (key(i) for i in [0, n)) that is in
// the window at time now; empty keys are skipped. Only the writer's
// goroutine may call it: it reads without the lock.
func (w *DedupWindow) FirstHeld(now int64, n int, key func(i int) string) (string, bool) {
	if len(w.index) == 0 {
		return "", false
	}
	// Load every key's home slot before probing any: the loads are
	// independent, so the processor overlaps their cache misses, and the
	// probes below (whose branches would stall it) then hit the cache.
	w.hashes = w.hashes[:0]
	mask := uint64(len(w.index) - 1)
	var sink uint64
	for i := range n {
		h := maphash.String(w.seed, key(i))
		w.hashes = append(w.hashes, h)
		sink += w.index[h&mask]
	}
	w.sink = sink
	for i, h := range w.hashes {
		if k := key(i); k != "" {
			if _, ok := w.lookup(k, h, now); ok {
				return k, true
			}
		}
	}
	return "", false
}

// Insert records key at time now, first dropping expired keys and, at the
// bound, the oldest keys. A key already present is replaced (callers only
// insert keys Lookup did not find).
func (w *DedupWindow) Insert(key string, e DedupEntry, now int64) {
	w.InsertAll(now, []DedupKey{{Key: key, DedupEntry: e}})
}

// InsertAll is Insert for each of keys in order, under one lock.
func (w *DedupWindow) InsertAll(now int64, keys []DedupKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range keys {
		w.expireLocked(now) // evicting may bring expired keys to the front
		for w.count >= w.maxKeys && w.popOldestLocked() {
			w.evicted++
		}
		w.insertLocked(k.Key, k.DedupEntry)
	}
}

func (w *DedupWindow) insertLocked(key string, e DedupEntry) {
	if w.tail-w.head >= uint64(2*w.count+1024) {
		// Dead entries (keys inserted again) pile up behind a long-lived
		// front entry only after the window was shortened; drop them.
		w.rebuildLocked()
	}
	if w.stale >= 64 && 8*w.stale >= len(w.index) || w.stale > 0 && w.tail-w.sweptAt >= 1<<30 {
		// The second bound keeps a stale slot's 32-bit sequence from ever
		// being taken for a live one.
		w.sweepLocked()
	}
	if (w.count+1)*4 > len(w.index) {
		// Live keys fill at most a quarter of the index and stale slots
		// an eighth, so probe runs stay short and a sweep (which scans the
		// whole index) clears one stale slot per eight scanned.
		w.resizeIndexLocked(max(2*len(w.index), 64))
	}
	h := maphash.String(w.seed, key)
	seq := w.pushLocked(dedupRec{DedupEntry: e, keyOff: w.arenaBase + uint64(len(w.arena)), keyLen: uint32(len(key))})
	w.arena = append(w.arena, key...)
	slot := uint64(uint32(h))<<32 | uint64(uint32(seq))
	at, free := w.probe(key, h)
	if at >= 0 {
		old, _ := w.liveSeq(w.index[at])
		w.rec(old).dead = true
		w.index[at] = slot
		return
	}
	if w.index[free] != 0 {
		w.stale-- // reusing a stale slot
	}
	w.index[free] = slot
	w.count++
}

// pushLocked appends r to the ring and returns its sequence, which is never
// 0 in its low 32 bits (so an index slot is never 0).
func (w *DedupWindow) pushLocked(r dedupRec) uint64 {
	for {
		if w.tail-w.head == uint64(len(w.ring)) {
			w.growRingLocked()
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

// popFrontLocked drops the ring's front entry, leaving its index slot (if
// live) stale, and releases arena bytes no entry needs.
func (w *DedupWindow) popFrontLocked() {
	r := w.rec(w.head)
	if !r.dead {
		w.count--
		w.stale++
	}
	w.arenaHead = r.keyOff + uint64(r.keyLen)
	*r = dedupRec{}
	w.head++
	if used := w.arenaHead - w.arenaBase; used > 64<<10 && used > uint64(len(w.arena))/2 {
		n := copy(w.arena, w.arena[used:])
		w.arena = w.arena[:n]
		w.arenaBase = w.arenaHead
	}
}

// sweepLocked empties every stale index slot in one sequential pass,
// shifting later slots of each probe run back so no run is broken.
func (w *DedupWindow) sweepLocked() {
	n := uint64(len(w.index))
	mask := n - 1
	start := uint64(0) // an empty slot: no probe run crosses it
	for w.index[start] != 0 {
		start++
	}
	tail, span := uint32(w.tail), uint32(w.tail-w.head)
	for k := uint64(1); k <= n; k++ {
		i := (start + k) & mask
		// liveSeq inlined for the scan: stale iff occupied and its
		// sequence is not in [head, tail).
		for slot := w.index[i]; slot != 0 && tail-uint32(slot)-1 >= span; slot = w.index[i] {
			w.removeSlotLocked(i)
		}
	}
	w.stale, w.sweptAt = 0, w.tail
}

// removeSlotLocked empties slot i, moving later slots of its probe run back
// (deletion by backward shift).
func (w *DedupWindow) removeSlotLocked(i uint64) {
	mask := uint64(len(w.index) - 1)
	for j := (i + 1) & mask; w.index[j] != 0; j = (j + 1) & mask {
		home := (w.index[j] >> 32) & mask
		// The slot at j may move to the hole at i unless its home lies
		// cyclically in (i, j].
		if (j-home)&mask >= (j-i)&mask {
			w.index[i] = w.index[j]
			i = j
		}
	}
	w.index[i] = 0
}

// resizeIndexLocked rebuilds the index with n slots, dropping stale ones.
func (w *DedupWindow) resizeIndexLocked(n int) {
	old := w.index
	w.index = make([]uint64, n)
	mask := uint64(n - 1)
	for _, slot := range old {
		if _, live := w.liveSeq(slot); !live {
			continue
		}
		i := (slot >> 32) & mask
		for w.index[i] != 0 {
			i = (i + 1) & mask
		}
		w.index[i] = slot
	}
	w.stale, w.sweptAt = 0, w.tail
}

func (w *DedupWindow) growRingLocked() {
	old := w.ring
	w.ring = make([]dedupRec, max(2*len(old), 64))
	for s := w.head; s < w.tail; s++ {
		*w.rec(s) = old[s&uint64(len(old)-1)]
	}
}

// rebuildLocked rebuilds the window from its live entries, in order.
func (w *DedupWindow) rebuildLocked() {
	live := w.keysLocked()
	w.index, w.count, w.stale, w.ring, w.head = nil, 0, 0, nil, w.tail
	w.arena, w.arenaBase, w.arenaHead = nil, 0, 0
	for _, k := range live {
		w.insertLocked(k.Key, k.DedupEntry)
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

// RestoreDedupWindow rebuilds a window from Keys' output.
func RestoreDedupWindow(maxKeys int, keys []DedupKey) *DedupWindow {
	w := NewDedupWindow(maxKeys)
	for _, k := range keys {
		w.insertLocked(k.Key, k.DedupEntry)
	}
	return w
}

// dedupEncodingVersion prefixes EncodeDedupKeys' output.
const dedupEncodingVersion = 1

// EncodeDedupKeys encodes keys compactly for a snapshot: per key its
// length and bytes, the digest, then partition, offset and expiry as
// varints.
func EncodeDedupKeys(keys []DedupKey) []byte {
	n := 1 + binary.MaxVarintLen64
	for _, k := range keys {
		n += len(k.Key) + len(k.Digest) + 4*binary.MaxVarintLen64
	}
	b := make([]byte, 0, n)
	b = append(b, dedupEncodingVersion)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k.Key)))
		b = append(b, k.Key...)
		b = append(b, k.Digest[:]...)
		b = binary.AppendVarint(b, int64(k.Partition))
		b = binary.AppendVarint(b, k.Offset)
		b = binary.AppendVarint(b, k.Expires)
	}
	return b
}

// ErrBadDedupEncoding means EncodeDedupKeys' output was damaged.
var ErrBadDedupEncoding = errors.New("partition: malformed idempotency window encoding")

// DecodeDedupKeys is the inverse of EncodeDedupKeys.
func DecodeDedupKeys(b []byte) ([]DedupKey, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if b[0] != dedupEncodingVersion {
		return nil, fmt.Errorf("%w: version %d", ErrBadDedupEncoding, b[0])
	}
	b = b[1:]
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) {
		return nil, fmt.Errorf("%w: key count", ErrBadDedupEncoding)
	}
	b = b[n:]
	keys := make([]DedupKey, 0, count)
	for i := uint64(0); i < count; i++ {
		kl, n := binary.Uvarint(b)
		if n <= 0 || kl > uint64(len(b)-n) {
			return nil, fmt.Errorf("%w: key %d", ErrBadDedupEncoding, i)
		}
		b = b[n:]
		var k DedupKey
		k.Key = string(b[:kl])
		b = b[kl:]
		if len(b) < len(k.Digest) {
			return nil, fmt.Errorf("%w: digest %d", ErrBadDedupEncoding, i)
		}
		copy(k.Digest[:], b)
		b = b[len(k.Digest):]
		vals := [3]int64{}
		for j := range vals {
			v, n := binary.Varint(b)
			if n <= 0 {
				return nil, fmt.Errorf("%w: entry %d", ErrBadDedupEncoding, i)
			}
			vals[j], b = v, b[n:]
		}
		k.Partition, k.Offset, k.Expires = int32(vals[0]), vals[1], vals[2]
		keys = append(keys, k)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrBadDedupEncoding, len(b))
	}
	return keys, nil
}

// ErrIdempotencyConflict means an idempotency key held in the window was
// sent again with a different payload. Nothing is appended.
var ErrIdempotencyConflict = errors.New("idempotency key reused with a different payload")

// MaxIdempotencyKeyBytes bounds an idempotency key.
const MaxIdempotencyKeyBytes = 1024
