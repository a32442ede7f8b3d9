package partition

import (
	"fmt"
	"runtime"
	"testing"
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
	enc := EncodeDedupKeys(win.Keys())
	dec, err := DecodeDedupKeys(enc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range enc {
		if _, err := DecodeDedupKeys(enc[:i]); err == nil && i > 0 {
			t.Fatalf("truncated encoding (%d of %d bytes) decoded", i, len(enc))
		}
	}
	r := RestoreDedupWindow(3, dec)
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
