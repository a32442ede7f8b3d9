package dedup

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// Entry is what a window remembers of one idempotency key: the
// payload's digest and where the record was appended.
type Entry struct {
	Digest    Digest `json:"digest"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	// Expires is when the key leaves the window (Unix nanoseconds of the
	// command time): the window is [appended, Expires).
	Expires int64 `json:"expires"`
}

// Key is one key with its entry, for snapshots and inserts.
type Key struct {
	Key string `json:"key"`
	Entry
}

// Window holds a topic's idempotency keys for a time window, bounded
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
// touch the index: evicting the oldest key costs no second random access.
// A bucket found full of live slots by an insert is marked as overflowed,
// and lookups go on to the next bucket only past a marked one. Every
// len(index) inserts a sweep empties stale slots and recomputes the marks;
// it also keeps a stale slot from outliving 2^32 sequences, after which its
// 32 bits of sequence would name a live entry again.
//
// The index buckets a command will touch are loaded first, all at once,
// so the processor overlaps their cache misses (hashKeysLocked).
//
// The ring and the arena are queues of fixed-size chunks and blocks, made
// and dropped one at a time: no change of the window moves or reallocates
// more than one block, whatever its size, so the state machine never
// stalls on a copy of millions of keys. An entry and its key bytes are
// written once, when pushed (a dead mark excepted), so a snapshot can
// freeze the window in O(keys/1024) and encode it later, off the state
// machine's goroutine, while the window changes (View). A dead mark on a
// chunk a view may be reading copies the chunk first, and chunks and
// blocks a view may read are not reused.
//
// Changes (Admit, Expire) take the write lock once per batch;
// reads (Lookup, Stats, Keys, KeysAt) take the read lock; View takes the
// write lock for a moment.
type Window struct {
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
	recs  [1 << chunkBits]entryRec
	epoch uint64
}

// entryRec is one ring entry. An entry is dead once its key was inserted
// again (after its window ended but before it reached the ring's front);
// the index no longer points at it.
type entryRec struct {
	Entry
	keyOff uint64 // absolute offset in the arena
	keyLen uint32
	dead   bool
}

// NewWindow returns an empty window holding at most maxKeys keys
// (at least 1).
func NewWindow(maxKeys int) *Window { return newWindowAt(maxKeys, 1) }

// newWindowAt starts the sequence at seq (tests start it near a
// 32-bit wrap).
func newWindowAt(maxKeys int, seq uint64) *Window {
	w := &Window{seed: maphash.MakeSeed(), hashMask: ^uint64(0), maxKeys: max(maxKeys, 1)}
	w.head, w.tail, w.firstChunk = seq, seq, seq>>chunkBits
	return w
}

// rec returns the entry of sequence seq, in [head, tail).
func (g *ring) rec(seq uint64) *entryRec {
	return &g.chunks[seq>>chunkBits-g.firstChunk].recs[seq&(1<<chunkBits-1)]
}

// keyBytes returns r's key, in place in the arena.
func (g *ring) keyBytes(r *entryRec) []byte {
	off := r.keyOff & (1<<blockBits - 1)
	return g.blocks[r.keyOff>>blockBits-g.firstBlock][off : off+uint64(r.keyLen)]
}

func (w *Window) keyIs(r *entryRec, key string) bool {
	return int(r.keyLen) == len(key) && string(w.keyBytes(r)) == key // no allocation
}

func (w *Window) keyOf(r *entryRec) string { return string(w.keyBytes(r)) }

// SetMaxKeys changes the bound; extra keys are evicted at the next Admit.
func (w *Window) SetMaxKeys(n int) {
	w.mu.Lock()
	w.maxKeys = max(n, 1)
	w.mu.Unlock()
}

// Lookup returns the entry for key if it is in the window at time now.
func (w *Window) Lookup(key string, now int64) (Entry, bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.lookup(key, w.hash(key), now)
}

func (w *Window) lookup(key string, h uint64, now int64) (Entry, bool) {
	at := w.find(key, h)
	if at < 0 {
		return Entry{}, false
	}
	r := w.rec(w.slotSeq(w.index[at]))
	if r.Expires <= now {
		return Entry{}, false
	}
	return r.Entry, true
}

// Admit inserts keys in order at time now, unless one of them is in the
// window at now: then it changes nothing and returns that key (the first
// such) and false. Each insert first drops the keys whose window ended
// and, at the bound, the oldest keys. Empty keys are ignored. This is the
// state machine's path for an append: one lock, and each key hashed once.
func (w *Window) Admit(now int64, keys []Key) (held string, admitted bool) {
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

func (w *Window) insertAllLocked(now int64, keys []Key, hashes []uint64) {
	for i, k := range keys {
		if k.Key == "" {
			continue
		}
		w.expireLocked(now) // evicting may bring expired keys to the front
		for w.count >= w.maxKeys && w.popOldestLocked() {
			w.evicted++
		}
		w.insertLocked(k.Key, hashes[i], k.Entry)
	}
}

func (w *Window) insertLocked(key string, h uint64, e Entry) {
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
	seq := w.pushLocked(entryRec{Entry: e, keyOff: w.appendKeyLocked(key), keyLen: uint32(len(key))})
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
func (w *Window) appendKeyLocked(key string) uint64 {
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
func (w *Window) markDeadLocked(seq uint64) {
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
func (w *Window) pushLocked(r entryRec) uint64 {
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
		*w.rec(seq) = entryRec{keyOff: r.keyOff, dead: true} // a placeholder
	}
}

// Expire drops keys whose window ended at or before now.
func (w *Window) Expire(now int64) {
	w.mu.Lock()
	w.expireLocked(now)
	w.mu.Unlock()
}

func (w *Window) expireLocked(now int64) {
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
func (w *Window) popOldestLocked() bool {
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
func (w *Window) popFrontLocked() {
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

// rebuildLocked rebuilds the window from its live entries, in order.
func (w *Window) rebuildLocked() {
	live := w.keysLocked()
	w.index, w.count, w.chunks, w.head, w.firstChunk = nil, 0, nil, w.tail, w.tail>>chunkBits
	w.blocks, w.firstBlock, w.arenaTail = nil, 0, 0
	for _, k := range live {
		w.insertLocked(k.Key, w.hash(k.Key), k.Entry)
	}
}

// Stats are a window's counters.
type Stats struct {
	Keys    int
	Evicted uint64
	Expired uint64
}

// Stats returns the number of keys held and the eviction and expiry
// counts since the window was made.
func (w *Window) Stats() Stats {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return Stats{Keys: w.count, Evicted: w.evicted, Expired: w.expired}
}

// Keys returns the live keys in insertion order.
func (w *Window) Keys() []Key {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.keysLocked()
}

func (w *Window) keysLocked() []Key {
	out := make([]Key, 0, w.count)
	for s := w.head; s < w.tail; s++ {
		if r := w.rec(s); !r.dead {
			out = append(out, Key{Key: w.keyOf(r), Entry: r.Entry})
		}
	}
	return out
}

// KeysAt fills in, for each (partition, offset) of at, the key of the
// record appended there if that key is in the window at time now; others
// are left as they are. One pass over the window, allocating only the keys
// found.
func (w *Window) KeysAt(now int64, at map[[2]int64]string) {
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

// MaxIdempotencyKeyBytes bounds an idempotency key.
const MaxIdempotencyKeyBytes = 1024
