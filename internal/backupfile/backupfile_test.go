package backupfile

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func sample(t *testing.T) ([]byte, Header, []Segment) {
	t.Helper()
	h := Header{Node: "n1", Index: 42, Term: 3, FeatureLevel: 4, SnapshotBytes: 5,
		Cluster: []Member{{ID: "n1", Address: "127.0.0.1:7071", Voter: true}}}
	segs := []Segment{
		{Topic: "a", TopicIndex: 7, Partition: 0, Base: 0, End: 3, Bytes: 4, Meta: []byte("meta0")},
		{Topic: "a", TopicIndex: 7, Partition: 1, Base: 10, End: 12, Bytes: 3, Meta: []byte("meta1")},
	}
	h.Segments, h.SegmentBytes = 2, 7
	var buf bytes.Buffer
	w, err := NewWriter(&buf, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteSnapshot(5, strings.NewReader("snap!")); err != nil {
		t.Fatal(err)
	}
	for i, s := range segs {
		if err := w.WriteSegment(s, strings.NewReader([]string{"dat0", "d1!"}[i])); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), h, segs
}

// readAll reads a whole backup, as a restore does.
func readAll(b []byte) (snap string, data []string, err error) {
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		return "", nil, err
	}
	sr, err := r.Snapshot()
	if err != nil {
		return "", nil, err
	}
	sb, err := io.ReadAll(sr)
	if err != nil {
		return "", nil, err
	}
	for {
		_, d, err := r.NextSegment()
		if err == io.EOF {
			return string(sb), data, nil
		}
		if err != nil {
			return "", nil, err
		}
		db, err := io.ReadAll(d)
		if err != nil {
			return "", nil, err
		}
		data = append(data, string(db))
	}
}

func TestRoundTrip(t *testing.T) {
	b, h, segs := sample(t)
	size, err := EncodedSize(h, segs)
	if err != nil || size != int64(len(b)) {
		t.Fatalf("EncodedSize = %d, %v; file has %d bytes", size, err, len(b))
	}
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Header(); got.Index != 42 || got.Term != 3 || got.Node != "n1" || got.FormatVersion != Version || len(got.Cluster) != 1 {
		t.Fatalf("header %+v", got)
	}
	snap, data, err := readAll(b)
	if err != nil || snap != "snap!" || strings.Join(data, ",") != "dat0,d1!" {
		t.Fatalf("read %q %q %v", snap, data, err)
	}
}

// TestDamage cuts the file at every length and flips every byte: each is
// refused with ErrTruncated or a *CorruptError (or, in the prefix, as not a
// backup), never read as a whole backup.
func TestDamage(t *testing.T) {
	b, _, _ := sample(t)
	for n := 0; n < len(b); n++ {
		_, _, err := readAll(b[:n])
		if err == nil {
			t.Fatalf("cut at %d of %d: read as whole", n, len(b))
		}
		if n >= prefixSize && !errors.Is(err, ErrTruncated) {
			t.Fatalf("cut at %d: %v, want ErrTruncated", n, err)
		}
	}
	for i := range b {
		d := bytes.Clone(b)
		d[i] ^= 0x40
		_, _, err := readAll(d)
		var ce *CorruptError
		switch {
		case err == nil:
			t.Fatalf("flip at %d: read as whole", i)
		case i < prefixSize:
			if !errors.Is(err, ErrNotBackup) && !errors.Is(err, ErrVersion) {
				t.Fatalf("flip at %d: %v", i, err)
			}
		case !errors.As(err, &ce) && !errors.Is(err, ErrTruncated):
			t.Fatalf("flip at %d: %v, want a CorruptError", i, err)
		}
	}
	if _, _, err := readAll(append(bytes.Clone(b), 0)); err == nil {
		t.Fatal("a byte after the trailer was accepted")
	}
}
