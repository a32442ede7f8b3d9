package partition

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

func TestDedupWindowExpiryBoundary(t *testing.T) {
	const w = int64(1000)
	win := NewDedupWindow(10)
	win.Insert("k", DedupEntry{Partition: 1, Offset: 7, Expires: 100 + w}, 100)
	for _, tc := range []struct {
		now  int64
		want bool
	}{{100, true}, {100 + w - 1, true}, {100 + w, false}, {100 + w + 1, false}} {
		if _, ok := win.Lookup("k", tc.now); ok != tc.want {
			t.Errorf("Lookup at %d = %v, want %v", tc.now, ok, tc.want)
		}
	}
	if got := win.Stats().Keys; got != 1 {
		t.Fatalf("lookup must not remove keys: %d", got)
	}
	win.Expire(100 + w)
	if st := win.Stats(); st.Keys != 0 || st.Expired != 1 {
		t.Fatalf("after expiry: %+v", st)
	}
}

func TestDedupWindowBound(t *testing.T) {
	win := NewDedupWindow(3)
	for i := 0; i < 5; i++ {
		win.Insert(fmt.Sprint("k", i), DedupEntry{Offset: int64(i), Expires: 1 << 40}, int64(i))
	}
	st := win.Stats()
	if st.Keys != 3 || st.Evicted != 2 {
		t.Fatalf("stats %+v, want 3 keys and 2 evicted", st)
	}
	for i, want := range []bool{false, false, true, true, true} {
		if _, ok := win.Lookup(fmt.Sprint("k", i), 10); ok != want {
			t.Errorf("k%d present=%v, want %v (oldest evicted first)", i, ok, want)
		}
	}
	// A snapshot round trip keeps keys, order and entries.
	enc := encodeDedupKeys(win.Keys())
	if direct := encodeWindow(t, win); string(direct) != string(enc) {
		t.Fatalf("window encodes %x, encodeDedupKeys(Keys()) %x", direct, enc)
	}
	dec, err := decodeDedupKeys(enc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range enc {
		if _, err := decodeDedupKeys(enc[:i]); err == nil && i > 0 {
			t.Fatalf("truncated encoding (%d of %d bytes) decoded", i, len(enc))
		}
	}
	r, err := ReadDedupWindow(bytes.NewReader(enc), int64(len(enc)), 3)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(dec) != fmt.Sprint(r.Keys()) {
		t.Fatalf("decodeDedupKeys %v, ReadDedupWindow %v", dec, r.Keys())
	}
	if fmt.Sprint(r.Keys()) != fmt.Sprint(win.Keys()) {
		t.Fatalf("restored %v, want %v", r.Keys(), win.Keys())
	}
	r.Insert("k5", DedupEntry{Expires: 1 << 40}, 11)
	if _, ok := r.Lookup("k2", 11); ok {
		t.Fatal("restored window must evict its oldest key first")
	}
}

func TestDedupWindowReinsertAfterExpiry(t *testing.T) {
	win := NewDedupWindow(10)
	win.Insert("a", DedupEntry{Offset: 1, Expires: 10}, 0)
	win.Insert("b", DedupEntry{Offset: 2, Expires: 15}, 5)
	win.Insert("a", DedupEntry{Offset: 3, Expires: 30}, 20) // "a" expired at 10; "b" at 15
	e, ok := win.Lookup("a", 20)
	if !ok || e.Offset != 3 {
		t.Fatalf("a = %+v %v", e, ok)
	}
	if st := win.Stats(); st.Keys != 1 || st.Expired != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRecordDigest(t *testing.T) {
	hs := func(kv ...string) func(func(string, []byte) bool) {
		return func(yield func(string, []byte) bool) {
			for i := 0; i+1 < len(kv); i += 2 {
				if !yield(kv[i], []byte(kv[i+1])) {
					return
				}
			}
		}
	}
	base := RecordDigest([]byte("k"), []byte("v"), hs("h", "1"))
	for name, d := range map[string]Digest{
		"null key":      RecordDigest(nil, []byte("v"), hs("h", "1")),
		"empty key":     RecordDigest([]byte{}, []byte("v"), hs("h", "1")),
		"other value":   RecordDigest([]byte("k"), []byte("w"), hs("h", "1")),
		"null value":    RecordDigest([]byte("k"), nil, hs("h", "1")),
		"no headers":    RecordDigest([]byte("k"), []byte("v"), nil),
		"header value":  RecordDigest([]byte("k"), []byte("v"), hs("h", "2")),
		"shifted bytes": RecordDigest([]byte("kv"), []byte(""), hs("h", "1")),
	} {
		if d == base {
			t.Errorf("%s: same digest as the base record", name)
		}
	}
	if RecordDigest([]byte("k"), []byte("v"), hs("h", "1")) != base {
		t.Fatal("digest is not deterministic")
	}
	// Digests are kept in snapshots and compared with digests computed by
	// other nodes and versions: the algorithm (XXH3-128 over the framed
	// fields) must never change.
	if got := fmt.Sprintf("%x", base); got != "b206f61403084de28f19116dc0dfccc1" {
		t.Fatalf("digest %s: the algorithm changed", got)
	}
}

// BenchmarkDedupWindowMemory reports the heap bytes per key held, with
// 24-byte keys.
func BenchmarkDedupWindowMemory(b *testing.B) {
	const n = 100_000
	for i := 0; i < b.N; i++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		win := NewDedupWindow(n)
		for j := 0; j < n; j++ {
			win.Insert(fmt.Sprintf("order-%018d", j), DedupEntry{Offset: int64(j), Expires: 1 << 40}, int64(j))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/key")
		runtime.KeepAlive(win)
	}
}

func BenchmarkDedupInsertLookup(b *testing.B) {
	win := NewDedupWindow(100_000)
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = fmt.Sprintf("order-%018d", i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := keys[i&(len(keys)-1)]
		if _, ok := win.Lookup(k, int64(i)); !ok {
			win.Insert(k, DedupEntry{Expires: int64(i) + 1<<20}, int64(i))
		}
	}
}

// BenchmarkDedupApplyAtBound is the state machine's path for new keys in a
// window at its bound: check that none of a command's keys is held, then
// insert them, each insert evicting the oldest key. In "cold", caches are
// flushed between commands (outside the timer), as the rest of a produce's
// path (batches through the Raft log and the partition log) does in logd.
func BenchmarkDedupApplyAtBound(b *testing.B) {
	b.Run("warm", func(b *testing.B) { benchDedupApply(b, false) })
	b.Run("cold", func(b *testing.B) { benchDedupApply(b, true) })
}

func benchDedupApply(b *testing.B, cold bool) {
	const bound, perCommand = 100_000, 1000
	win := NewDedupWindow(bound)
	keys := make([]string, 4*bound)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench-1796000000000000000-%d", i)
	}
	var flush []byte
	if cold {
		flush = make([]byte, 64<<20)
	}
	next := 0
	inserts := make([]DedupKey, perCommand)
	command := func(now int64) {
		batch := keys[next : next+perCommand]
		next = (next + perCommand) % len(keys)
		for i, k := range batch {
			inserts[i] = DedupKey{Key: k, DedupEntry: DedupEntry{Offset: int64(i), Expires: now + 1<<40}}
		}
		if k, ok := win.Admit(now, inserts); !ok {
			b.Fatalf("key %s held", k)
		}
	}
	for i := 0; i < 2*bound/perCommand; i++ {
		command(int64(i))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i += perCommand {
		if cold {
			b.StopTimer()
			for j := 0; j < len(flush); j += 64 {
				flush[j]++
			}
			b.StartTimer()
		}
		command(int64(i))
	}
}

// dedupModel is the window's specification in the plainest form: entries
// in insertion order, the oldest first.
type dedupModel struct {
	entries          []DedupKey
	dead             []bool
	maxKeys          int
	evicted, expired uint64
}

func (m *dedupModel) live() int {
	n := 0
	for i := range m.entries {
		if !m.dead[i] {
			n++
		}
	}
	return n
}

func (m *dedupModel) lookup(key string, now int64) (DedupEntry, bool) {
	for i := len(m.entries) - 1; i >= 0; i-- {
		if !m.dead[i] && m.entries[i].Key == key {
			if m.entries[i].Expires <= now {
				return DedupEntry{}, false
			}
			return m.entries[i].DedupEntry, true
		}
	}
	return DedupEntry{}, false
}

func (m *dedupModel) pop() {
	m.entries, m.dead = m.entries[1:], m.dead[1:]
}

func (m *dedupModel) expire(now int64) {
	for len(m.entries) > 0 {
		if !m.dead[0] {
			if m.entries[0].Expires > now {
				return
			}
			m.expired++
		}
		m.pop()
	}
}

func (m *dedupModel) insert(k DedupKey, now int64) {
	m.expire(now)
	for m.live() >= m.maxKeys {
		for m.dead[0] {
			m.pop()
		}
		m.pop()
		m.evicted++
	}
	for i := range m.entries {
		if !m.dead[i] && m.entries[i].Key == k.Key {
			m.dead[i] = true
		}
	}
	m.entries = append(m.entries, k)
	m.dead = append(m.dead, false)
}

func (m *dedupModel) keys() []DedupKey {
	out := []DedupKey{}
	for i, k := range m.entries {
		if !m.dead[i] {
			out = append(out, k)
		}
	}
	return out
}

// modelKey names key id: lengths from 2 bytes to 1 KiB (the longest key
// allowed), so keys fill arena blocks at all paces and often reach a
// block's end.
func modelKey(id int) string {
	return fmt.Sprintf("k%d%s", id, strings.Repeat("p", id*37%1000))
}

// TestDedupWindowModel runs random inserts, lookups, expiries, bound
// changes and snapshot round trips against dedupModel. Few distinct keys
// and windows of varying length make keys come back after expiry and
// index probe runs wrap and shift.
//
// With seeds 9 to 16 every key hashes to one of 4 home buckets, so most
// keys live outside their home bucket: buckets overflow, and sweeps must
// recompute the overflow marks and keep every key findable.
//
// Views (snapshots) are taken at random points and encoded many operations
// later, which must give the keys the model held when each was taken: the
// window must never write what an outstanding view reads.
func TestDedupWindowModel(t *testing.T) {
	type heldView struct {
		v    *DedupView
		want []byte
	}
	checkView := func(seed int64, op int, hv heldView) {
		t.Helper()
		var got bytes.Buffer
		if n, err := hv.v.WriteTo(&got); err != nil || n != int64(got.Len()) {
			t.Fatalf("seed %d op %d: view WriteTo = %d, %v", seed, op, n, err)
		}
		if !bytes.Equal(got.Bytes(), hv.want) || hv.v.Len() != int64(len(hv.want)) {
			t.Fatalf("seed %d op %d: view (len %d) encodes\n%x\nwant\n%x", seed, op, hv.v.Len(), got.Bytes(), hv.want)
		}
		hv.v.Release()
	}
	for seed := int64(1); seed <= 16; seed++ {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		maxKeys := 1 + rng.IntN(300)
		start := uint64(1)
		if seed%2 == 0 {
			start = 1<<32 - uint64(rng.IntN(3000)) // sequences wrap 32 bits
		}
		hashMask := ^uint64(0)
		if seed > 8 {
			hashMask = 3<<32 | 0xffffffff
		}
		win := newDedupWindowAt(maxKeys, start)
		win.hashMask = hashMask
		m := &dedupModel{maxKeys: maxKeys}
		var views []heldView
		now := int64(0)
		nkeys := 10 + rng.IntN(2000)
		for op := 0; op < 8_000; op++ {
			now += int64(rng.IntN(3))
			key := modelKey(rng.IntN(nkeys))
			switch r := rng.IntN(100); {
			case r < 50:
				batch := []DedupKey{{Key: key}}
				for range rng.IntN(4) {
					batch = append(batch, DedupKey{Key: modelKey(rng.IntN(nkeys))})
				}
				wantHeld := ""
				for i := range batch {
					batch[i].Offset = int64(op*10 + i)
					batch[i].Partition = int32(i)
					batch[i].Digest = Digest{byte(op), byte(i)}
					batch[i].Expires = now + 1 + int64(rng.IntN(400))
					if _, ok := m.lookup(batch[i].Key, now); ok && wantHeld == "" {
						wantHeld = batch[i].Key
					}
				}
				if rng.IntN(2) == 0 {
					// The state machine's path: all or nothing.
					held, ok := win.Admit(now, batch)
					if held != wantHeld || ok != (wantHeld == "") {
						t.Fatalf("seed %d op %d: Admit = %q %v, want %q", seed, op, held, ok, wantHeld)
					}
					if !ok {
						continue
					}
				} else {
					if wantHeld != "" {
						continue // callers insert only keys not held
					}
					win.InsertAll(now, batch)
				}
				for i := range batch {
					m.insert(batch[i], now)
				}
			case r < 85:
				got, gok := win.Lookup(key, now)
				want, wok := m.lookup(key, now)
				if got != want || gok != wok {
					t.Fatalf("seed %d op %d: Lookup(%s, %d) = %+v %v, want %+v %v", seed, op, key, now, got, gok, want, wok)
				}
			case r < 90:
				win.Expire(now)
				m.expire(now)
			case r < 92:
				maxKeys = 1 + rng.IntN(300)
				win.SetMaxKeys(maxKeys)
				m.maxKeys = maxKeys
			case r < 94 && seed%3 != 0: // seeds 3, 6, …: one window throughout, for the long-lived view
				keys := win.Keys()
				win = NewDedupWindow(maxKeys)
				win.hashMask = hashMask
				win.restore(keys)
				m.evicted, m.expired = 0, 0 // counters are per process, not snapshotted
			case r < 96:
				// The first view lives to the end, past chunks the window
				// drops and makes again.
				if len(views) < 3 {
					views = append(views, heldView{win.View(), encodeDedupKeys(m.keys())})
				} else {
					i := 1 + rng.IntN(len(views)-1)
					checkView(seed, op, views[i])
					views = slices.Delete(views, i, i+1)
				}
			case r < 97:
				// Sweeps run every len(index) inserts; restores and resizes
				// here come sooner, so sweep at random points as well.
				win.mu.Lock()
				win.sweepLocked()
				win.mu.Unlock()
			default:
				st := win.Stats()
				if st.Keys != m.live() || st.Evicted != m.evicted || st.Expired != m.expired {
					t.Fatalf("seed %d op %d: stats %+v, want keys %d evicted %d expired %d", seed, op, st, m.live(), m.evicted, m.expired)
				}
				if got, want := fmt.Sprint(win.Keys()), fmt.Sprint(m.keys()); got != want {
					t.Fatalf("seed %d op %d: keys\n%s\nwant\n%s", seed, op, got, want)
				}
			}
		}
		for _, hv := range views {
			checkView(seed, -1, hv)
		}
	}
}

// BenchmarkDedupSnapshot is a snapshot of a window of 100k keys at its
// bound: "view" is what the state machine's goroutine pays (View and
// Release), "write" the encoding Persist then streams.
func BenchmarkDedupSnapshot(b *testing.B) {
	const n = 100_000
	win := NewDedupWindow(n)
	for j := range 2 * n {
		win.Insert(fmt.Sprintf("bench-1796000000000000000-%d", j), DedupEntry{Offset: int64(j), Expires: 1 << 40}, int64(j))
	}
	b.Run("view", func(b *testing.B) {
		for b.Loop() {
			win.View().Release()
		}
	})
	b.Run("write", func(b *testing.B) {
		v := win.View()
		defer v.Release()
		for b.Loop() {
			if _, err := v.WriteTo(io.Discard); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/key")
	})
}

// BenchmarkDigest digests a 128-byte value with a 16-byte key and one
// header, as the server does for every keyed record.
func BenchmarkDigest(b *testing.B) {
	dg := NewDigester()
	key, value := []byte("customer-0000042"), make([]byte, 128)
	headers := func(yield func(string, []byte) bool) { yield("trace", []byte("0af7651916cd43dd")) }
	b.SetBytes(int64(len(key) + len(value) + 5 + 16))
	for b.Loop() {
		dg.Digest(key, value, headers)
	}
}

// TestDedupViewConcurrent encodes views while the window goes on taking
// keys (evicting, dropping and making ring chunks and arena blocks,
// re-inserting keys whose window ended): each view must encode the keys of
// its moment. Under the race detector it also proves the view reads
// nothing the window writes.
func TestDedupViewConcurrent(t *testing.T) {
	win := NewDedupWindow(500)
	pad := strings.Repeat("x", 200)
	now := int64(0)
	insert := func(n int) {
		for range n {
			now++
			// Keys come back after their window (50 to 450) ended, some
			// while an entry with a longer window holds theirs in the
			// ring: those are found in the index, their entries marked
			// dead.
			k := fmt.Sprintf("key-%d-%s", now%300, pad) // ~200 bytes: a block per ~300 keys
			if _, ok := win.Lookup(k, now); !ok {
				win.Insert(k, DedupEntry{Offset: now, Expires: now + 50 + now%5*100}, now)
			}
		}
	}
	insert(3000)
	for round := range 20 {
		want := encodeDedupKeys(win.Keys())
		v := win.View()
		done := make(chan []byte)
		go func() {
			var b bytes.Buffer
			if _, err := v.WriteTo(&b); err != nil {
				b.Reset()
			}
			done <- b.Bytes()
		}()
		insert(2500) // past two chunks of sequences
		got := <-done
		if !bytes.Equal(got, want) || v.Len() != int64(len(want)) {
			t.Fatalf("round %d: view encodes %d bytes (Len %d), want %d", round, len(got), v.Len(), len(want))
		}
		// Checked again after the window moved on: a view never changes.
		var again bytes.Buffer
		if _, err := v.WriteTo(&again); err != nil || !bytes.Equal(again.Bytes(), want) {
			t.Fatalf("round %d: view changed after the window moved on (%v)", round, err)
		}
		v.Release()
		v.Release() // a second release does nothing
		if n := win.views.Load(); n != 0 {
			t.Fatalf("round %d: %d views outstanding after release", round, n)
		}
	}
}

type failingWriter struct{ after int }

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errors.New("disk full")
	}
	f.after--
	return len(p), nil
}

// TestDedupViewWriteError: a failed write ends WriteTo with the error, at
// the first write or a later one.
func TestDedupViewWriteError(t *testing.T) {
	win := NewDedupWindow(10_000)
	for i := range 5000 {
		win.Insert(fmt.Sprintf("key-%d", i), DedupEntry{Expires: 1 << 40}, 0)
	}
	v := win.View()
	defer v.Release()
	var all bytes.Buffer
	if _, err := v.WriteTo(&all); err != nil || int64(all.Len()) != v.Len() {
		t.Fatalf("WriteTo = %d bytes, %v; Len %d", all.Len(), err, v.Len())
	}
	for _, after := range []int{0, 1} {
		if n, err := v.WriteTo(&failingWriter{after: after}); err == nil || n >= v.Len() {
			t.Fatalf("after %d writes: WriteTo = %d, %v; want the write's error", after, n, err)
		}
	}
}

// TestReadDedupWindow: a window decoded from a stream equals the window
// encoded, reads exactly its section of a longer stream, and refuses a
// truncated or padded section with ErrBadDedupEncoding and a failing
// reader with the reader's error.
func TestReadDedupWindow(t *testing.T) {
	win := NewDedupWindow(1000)
	for i := range 700 {
		win.Insert(modelKey(i), DedupEntry{Digest: Digest{byte(i)}, Partition: int32(i % 3), Offset: int64(i), Expires: int64(1000 + i)}, int64(i))
	}
	enc := encodeWindow(t, win)
	other := NewDedupWindow(10)
	other.Insert("other", DedupEntry{Offset: 9, Expires: 99}, 0)
	stream := bytes.NewReader(append(slices.Clone(enc), encodeWindow(t, other)...))
	got, err := ReadDedupWindow(stream, int64(len(enc)), 1000)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got.Keys()) != fmt.Sprint(win.Keys()) {
		t.Fatal("decoded window differs from the encoded one")
	}
	next, err := ReadDedupWindow(stream, int64(stream.Len()), 10)
	if err != nil || fmt.Sprint(next.Keys()) != fmt.Sprint(other.Keys()) {
		t.Fatalf("the next section: %v, %v", next.Keys(), err)
	}
	if w, err := ReadDedupWindow(bytes.NewReader(nil), 0, 5); err != nil || w.Stats().Keys != 0 {
		t.Fatalf("empty section: %v, %v", w, err)
	}
	for _, n := range []int{1, 2, len(enc) / 2, len(enc) - 1} {
		if _, err := ReadDedupWindow(bytes.NewReader(enc[:n]), int64(n), 1000); !errors.Is(err, ErrBadDedupEncoding) {
			t.Fatalf("section cut to %d of %d bytes: %v", n, len(enc), err)
		}
	}
	padded := append(slices.Clone(enc), 0)
	if _, err := ReadDedupWindow(bytes.NewReader(padded), int64(len(padded)), 1000); !errors.Is(err, ErrBadDedupEncoding) {
		t.Fatalf("a byte after the last key: %v", err)
	}
	_, err = ReadDedupWindow(io.MultiReader(bytes.NewReader(enc[:100]), iotest.ErrReader(errors.New("disk gone"))), int64(len(enc)), 1000)
	if err == nil || errors.Is(err, ErrBadDedupEncoding) || !strings.Contains(err.Error(), "disk gone") {
		t.Fatalf("failing reader: %v", err)
	}
}

// encodeDedupKeys is the reference encoder of a window's encoding
// (dedupEncodingVersion), from a list of keys: what a window holding keys
// must write.
func encodeDedupKeys(keys []DedupKey) []byte {
	n := 1 + binary.MaxVarintLen64
	for _, k := range keys {
		n += len(k.Key) + len(k.Digest) + 4*binary.MaxVarintLen64
	}
	b := make([]byte, 0, n)
	b = append(b, dedupEncodingVersion)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendDedupKey(b, k.Key, k.DedupEntry)
	}
	return b
}

// decodeDedupKeys is the inverse of encodeDedupKeys.
func decodeDedupKeys(b []byte) ([]DedupKey, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var keys []DedupKey
	err := decodeDedup(bytes.NewReader(b), int64(len(b)), func(key []byte, e DedupEntry) {
		keys = append(keys, DedupKey{Key: string(key), DedupEntry: e})
	})
	if err != nil {
		return nil, err
	}
	return keys, nil
}

// encodeWindow is the window's own encoding, through a view.
func encodeWindow(t testing.TB, w *DedupWindow) []byte {
	t.Helper()
	v := w.View()
	defer v.Release()
	var b bytes.Buffer
	if _, err := v.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
