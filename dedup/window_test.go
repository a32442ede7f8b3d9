package dedup

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
)

// insert records key at time now as Admit does, without its check that no
// key is held: first dropping expired keys and, at the bound, the oldest
// keys. A key already present is replaced.
func (w *Window) insert(key string, e Entry, now int64) {
	w.insertAll(now, []Key{{Key: key, Entry: e}})
}

// insertAll is insert for each of keys in order, under one lock; empty keys
// are ignored.
func (w *Window) insertAll(now int64, keys []Key) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.insertAllLocked(now, keys, w.hashKeysLocked(keys))
}

func TestWindowExpiryBoundary(t *testing.T) {
	const w = int64(1000)
	win := NewWindow(10)
	win.insert("k", Entry{Partition: 1, Offset: 7, Expires: 100 + w}, 100)
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

func TestWindowBound(t *testing.T) {
	win := NewWindow(3)
	for i := 0; i < 5; i++ {
		win.insert(fmt.Sprint("k", i), Entry{Offset: int64(i), Expires: 1 << 40}, int64(i))
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
	enc := encodeKeys(win.Keys())
	if direct := encodeWindow(t, win); string(direct) != string(enc) {
		t.Fatalf("window encodes %x, encodeKeys(Keys()) %x", direct, enc)
	}
	dec, err := decodeKeys(enc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range enc {
		if _, err := decodeKeys(enc[:i]); err == nil && i > 0 {
			t.Fatalf("truncated encoding (%d of %d bytes) decoded", i, len(enc))
		}
	}
	r, err := ReadWindow(bytes.NewReader(enc), int64(len(enc)), 3)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(dec) != fmt.Sprint(r.Keys()) {
		t.Fatalf("decodeKeys %v, ReadWindow %v", dec, r.Keys())
	}
	if fmt.Sprint(r.Keys()) != fmt.Sprint(win.Keys()) {
		t.Fatalf("restored %v, want %v", r.Keys(), win.Keys())
	}
	r.insert("k5", Entry{Expires: 1 << 40}, 11)
	if _, ok := r.Lookup("k2", 11); ok {
		t.Fatal("restored window must evict its oldest key first")
	}
}

func TestWindowReinsertAfterExpiry(t *testing.T) {
	win := NewWindow(10)
	win.insert("a", Entry{Offset: 1, Expires: 10}, 0)
	win.insert("b", Entry{Offset: 2, Expires: 15}, 5)
	win.insert("a", Entry{Offset: 3, Expires: 30}, 20) // "a" expired at 10; "b" at 15
	e, ok := win.Lookup("a", 20)
	if !ok || e.Offset != 3 {
		t.Fatalf("a = %+v %v", e, ok)
	}
	if st := win.Stats(); st.Keys != 1 || st.Expired != 2 {
		t.Fatalf("stats %+v", st)
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
		win := NewWindow(n)
		for j := 0; j < n; j++ {
			win.insert(fmt.Sprintf("order-%018d", j), Entry{Offset: int64(j), Expires: 1 << 40}, int64(j))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/key")
		runtime.KeepAlive(win)
	}
}

func BenchmarkDedupInsertLookup(b *testing.B) {
	win := NewWindow(100_000)
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = fmt.Sprintf("order-%018d", i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := keys[i&(len(keys)-1)]
		if _, ok := win.Lookup(k, int64(i)); !ok {
			win.insert(k, Entry{Expires: int64(i) + 1<<20}, int64(i))
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
	win := NewWindow(bound)
	keys := make([]string, 4*bound)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench-1796000000000000000-%d", i)
	}
	var flush []byte
	if cold {
		flush = make([]byte, 64<<20)
	}
	next := 0
	inserts := make([]Key, perCommand)
	command := func(now int64) {
		batch := keys[next : next+perCommand]
		next = (next + perCommand) % len(keys)
		for i, k := range batch {
			inserts[i] = Key{Key: k, Entry: Entry{Offset: int64(i), Expires: now + 1<<40}}
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
