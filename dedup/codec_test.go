package dedup

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// BenchmarkDedupSnapshot is a snapshot of a window of 100k keys at its
// bound: "view" is what the state machine's goroutine pays (View and
// Release), "write" the encoding Persist then streams.
func BenchmarkDedupSnapshot(b *testing.B) {
	const n = 100_000
	win := NewWindow(n)
	for j := range 2 * n {
		win.insert(fmt.Sprintf("bench-1796000000000000000-%d", j), Entry{Offset: int64(j), Expires: 1 << 40}, int64(j))
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

// TestViewConcurrent encodes views while the window goes on taking
// keys (evicting, dropping and making ring chunks and arena blocks,
// re-inserting keys whose window ended): each view must encode the keys of
// its moment. Under the race detector it also proves the view reads
// nothing the window writes.
func TestViewConcurrent(t *testing.T) {
	win := NewWindow(500)
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
				win.insert(k, Entry{Offset: now, Expires: now + 50 + now%5*100}, now)
			}
		}
	}
	insert(3000)
	for round := range 20 {
		want := encodeKeys(win.Keys())
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

// TestViewWriteError: a failed write ends WriteTo with the error, at
// the first write or a later one.
func TestViewWriteError(t *testing.T) {
	win := NewWindow(10_000)
	for i := range 5000 {
		win.insert(fmt.Sprintf("key-%d", i), Entry{Expires: 1 << 40}, 0)
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

// TestReadWindow: a window decoded from a stream equals the window
// encoded, reads exactly its section of a longer stream, and refuses a
// truncated or padded section with ErrBadEncoding and a failing
// reader with the reader's error.
func TestReadWindow(t *testing.T) {
	win := NewWindow(1000)
	for i := range 700 {
		win.insert(modelKey(i), Entry{Digest: Digest{byte(i)}, Partition: int32(i % 3), Offset: int64(i), Expires: int64(1000 + i)}, int64(i))
	}
	enc := encodeWindow(t, win)
	other := NewWindow(10)
	other.insert("other", Entry{Offset: 9, Expires: 99}, 0)
	stream := bytes.NewReader(append(slices.Clone(enc), encodeWindow(t, other)...))
	got, err := ReadWindow(stream, int64(len(enc)), 1000)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got.Keys()) != fmt.Sprint(win.Keys()) {
		t.Fatal("decoded window differs from the encoded one")
	}
	next, err := ReadWindow(stream, int64(stream.Len()), 10)
	if err != nil || fmt.Sprint(next.Keys()) != fmt.Sprint(other.Keys()) {
		t.Fatalf("the next section: %v, %v", next.Keys(), err)
	}
	if w, err := ReadWindow(bytes.NewReader(nil), 0, 5); err != nil || w.Stats().Keys != 0 {
		t.Fatalf("empty section: %v, %v", w, err)
	}
	for _, n := range []int{1, 2, len(enc) / 2, len(enc) - 1} {
		if _, err := ReadWindow(bytes.NewReader(enc[:n]), int64(n), 1000); !errors.Is(err, ErrBadEncoding) {
			t.Fatalf("section cut to %d of %d bytes: %v", n, len(enc), err)
		}
	}
	padded := append(slices.Clone(enc), 0)
	if _, err := ReadWindow(bytes.NewReader(padded), int64(len(padded)), 1000); !errors.Is(err, ErrBadEncoding) {
		t.Fatalf("a byte after the last key: %v", err)
	}
	_, err = ReadWindow(io.MultiReader(bytes.NewReader(enc[:100]), iotest.ErrReader(errors.New("disk gone"))), int64(len(enc)), 1000)
	if err == nil || errors.Is(err, ErrBadEncoding) || !strings.Contains(err.Error(), "disk gone") {
		t.Fatalf("failing reader: %v", err)
	}
}

// encodeKeys is the reference encoder of a window's encoding
// (encodingVersion), from a list of keys: what a window holding keys
// must write.
func encodeKeys(keys []Key) []byte {
	n := 1 + binary.MaxVarintLen64
	for _, k := range keys {
		n += len(k.Key) + len(k.Digest) + 4*binary.MaxVarintLen64
	}
	b := make([]byte, 0, n)
	b = append(b, encodingVersion)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendKey(b, k.Key, k.Entry)
	}
	return b
}

// decodeKeys is the inverse of encodeKeys.
func decodeKeys(b []byte) ([]Key, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var keys []Key
	err := decode(bytes.NewReader(b), int64(len(b)), func(key []byte, e Entry) {
		keys = append(keys, Key{Key: string(key), Entry: e})
	})
	if err != nil {
		return nil, err
	}
	return keys, nil
}

// encodeWindow is the window's own encoding, through a view.
func encodeWindow(t testing.TB, w *Window) []byte {
	t.Helper()
	v := w.View()
	defer v.Release()
	var b bytes.Buffer
	if _, err := v.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// FuzzReadWindow: any bytes decode to ErrBadEncoding or to a window whose
// own encoding is as long as its view says and decodes to the same keys,
// which encode to the same bytes again; nothing panics, however damaged
// the snapshot section.
func FuzzReadWindow(f *testing.F) {
	win := NewWindow(10)
	for i := range 4 {
		win.insert(modelKey(i), Entry{Digest: Digest{byte(i), 7}, Partition: int32(i), Offset: int64(-i), Expires: 1 << 40}, int64(i))
	}
	enc := encodeWindow(f, win)
	f.Add(enc)
	f.Add(enc[:len(enc)/2])
	f.Add(encodeKeys([]Key{{Key: "a"}, {Key: "a", Entry: Entry{Offset: 1}}, {Key: ""}}))
	f.Add([]byte{encodingVersion, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := ReadWindow(bytes.NewReader(data), int64(len(data)), 100)
		if err != nil {
			if !errors.Is(err, ErrBadEncoding) {
				t.Fatalf("a damaged section from memory: %v, not ErrBadEncoding", err)
			}
			return
		}
		v := w.View()
		defer v.Release()
		var b bytes.Buffer
		if _, err := v.WriteTo(&b); err != nil || int64(b.Len()) != v.Len() {
			t.Fatalf("WriteTo = %d bytes, %v; Len %d", b.Len(), err, v.Len())
		}
		again, err := ReadWindow(bytes.NewReader(b.Bytes()), int64(b.Len()), 100)
		if err != nil {
			t.Fatalf("the window's own encoding does not decode: %v", err)
		}
		if fmt.Sprint(again.Keys()) != fmt.Sprint(w.Keys()) {
			t.Fatalf("round trip changed the keys:\n%v\n%v", w.Keys(), again.Keys())
		}
		if enc2 := encodeWindow(t, again); !bytes.Equal(enc2, b.Bytes()) {
			t.Fatalf("re-encoding differs:\n%x\n%x", b.Bytes(), enc2)
		}
	})
}
