package backupfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// sampleHeader is the header of the sample files, without segments or
// groups: a snapshot of 5 bytes.
func sampleHeader() Header {
	return Header{Node: "n1", Index: 42, Term: 3, FeatureLevel: 4, SnapshotBytes: 5,
		Cluster: []Member{{ID: "n1", Address: "127.0.0.1:7071", Voter: true}}}
}

func sample(t *testing.T) ([]byte, Header, []Segment) {
	t.Helper()
	h := sampleHeader()
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
	checkDamage(t, b, func(b []byte) error {
		_, _, err := readAll(b)
		return err
	})
}

// checkDamage cuts b, a whole backup, at every length and flips each of
// its bytes: read refuses each with ErrTruncated or a *CorruptError (or,
// in the prefix, as not a backup), never reads one as whole; and a byte
// after the trailer is refused too.
func checkDamage(t *testing.T, b []byte, read func([]byte) error) {
	t.Helper()
	for n := 0; n < len(b); n++ {
		err := read(b[:n])
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
		err := read(d)
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
	if err := read(append(bytes.Clone(b), 0)); err == nil {
		t.Fatal("a byte after the trailer was accepted")
	}
}

// sampleGroups is a version 2 backup with two data groups' parts after
// the meta group's: one with a segment, one without.
func sampleGroups(t *testing.T) ([]byte, Header) {
	t.Helper()
	h := sampleHeader()
	meta := []Segment{{Topic: "a", TopicIndex: 7, Partition: 0, Base: 0, End: 3, Bytes: 4, Meta: []byte("meta0")}}
	g1 := []Segment{{Topic: "b", TopicIndex: 9, Partition: 1, Base: 0, End: 2, Bytes: 3, Meta: []byte("meta1")}}
	h.Groups = []Group{
		{ID: 1, Node: "n2", Index: 17, Term: 2, FeatureLevel: 5, SnapshotBytes: 3, Segments: 1, SegmentBytes: 3,
			Cluster: []Member{{ID: "n2", Address: "127.0.0.1:7072", Voter: true}}},
		{ID: 4, Node: "n1", Index: 8, Term: 1, SnapshotBytes: 2},
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
	if err := w.WriteSegment(meta[0], strings.NewReader("dat0")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil {
		t.Fatal("a trailer before the header's groups was written")
	}
	if err := w.WriteGroup(h.Groups[1]); err == nil {
		t.Fatal("group 4 written where the header lists group 1")
	}
	for i, g := range h.Groups {
		if err := w.WriteGroup(g); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteSnapshot(g.SnapshotBytes, strings.NewReader([]string{"gs1", "g4"}[i])); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := w.WriteSegment(g1[0], strings.NewReader("d1!")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	size, err := EncodedSize(h, meta, g1, nil)
	if err != nil || size != int64(buf.Len()) {
		t.Fatalf("EncodedSize = %d, %v; file has %d bytes", size, err, buf.Len())
	}
	return buf.Bytes(), h
}

// readGroups reads a whole backup part by part: each part's snapshot and
// data, the meta group's first.
func readGroups(b []byte) ([]string, error) {
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	var parts []string
	for g := 0; ; g++ {
		if g > 0 {
			gr, err := r.NextGroup()
			if err == io.EOF {
				return parts, nil
			}
			if err != nil {
				return nil, err
			}
			parts = append(parts, fmt.Sprintf("g%d@%d", gr.ID, gr.Index))
		}
		sr, err := r.Snapshot()
		if err != nil {
			return nil, err
		}
		sb, err := io.ReadAll(sr)
		if err != nil {
			return nil, err
		}
		parts = append(parts, string(sb))
		for {
			_, d, err := r.NextSegment()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, err
			}
			db, err := io.ReadAll(d)
			if err != nil {
				return nil, err
			}
			parts = append(parts, string(db))
		}
	}
}

// TestGroupsRoundTrip: the data groups' parts of a version 2 file are
// read back in the header's order, each its snapshot and segments; a
// reader that reads only the segments (as inspect does) passes over the
// snapshots, and one that reads only the meta group's part and asks for
// the next group passes over its rest.
func TestGroupsRoundTrip(t *testing.T) {
	b, h := sampleGroups(t)
	parts, err := readGroups(b)
	if err != nil || strings.Join(parts, ",") != "snap!,dat0,g1@17,gs1,d1!,g4@8,g4" {
		t.Fatalf("read %q, %v", parts, err)
	}
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Header(); got.FormatVersion != 2 || len(got.Groups) != 2 || got.Groups[0].Cluster[0] != h.Groups[0].Cluster[0] {
		t.Fatalf("header %+v", got)
	}
	if _, _, err := r.NextSegment(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.NextSegment(); err != io.EOF {
		t.Fatalf("the end of the meta group's part: %v, want io.EOF", err)
	}
	if _, _, err := r.NextSegment(); err != io.EOF {
		t.Fatalf("NextSegment again before NextGroup: %v, want io.EOF", err)
	}
	for _, want := range []uint64{1, 4} {
		g, err := r.NextGroup()
		if err != nil || g.ID != want {
			t.Fatalf("next group %+v, %v; want %d", g, err, want)
		}
	}
	if _, err := r.NextGroup(); err != io.EOF {
		t.Fatalf("after the last group: %v, want io.EOF", err)
	}
}

// TestGroupsDamage: a version 2 file cut at every length or with any byte
// flipped is refused, as a version 1 file is.
func TestGroupsDamage(t *testing.T) {
	b, _ := sampleGroups(t)
	checkDamage(t, b, func(b []byte) error {
		_, err := readGroups(b)
		return err
	})
}

// writeVersion1 writes h and a snapshot in format version 1, as the build
// before version 2 did: the prefix and header name version 1.
func writeVersion1(t *testing.T, h Header, snap string) []byte {
	t.Helper()
	var buf bytes.Buffer
	bw := &Writer{sum: sha256.New()}
	bw.w = io.MultiWriter(&buf, bw.sum)
	var pre [prefixSize]byte
	copy(pre[:], Magic)
	binary.BigEndian.PutUint32(pre[len(Magic):], 1)
	bw.w.Write(pre[:])
	h.FormatVersion = 1
	if err := bw.writeJSON(kindHeader, h); err != nil {
		t.Fatal(err)
	}
	if err := bw.WriteSnapshot(int64(len(snap)), strings.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if err := bw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestVersion1: a version 1 file is read; one whose header lists data
// groups is corrupt; a version above this build's is refused.
func TestVersion1(t *testing.T) {
	b := writeVersion1(t, Header{Node: "n1", Index: 5, SnapshotBytes: 2}, "s1")
	parts, err := readGroups(b)
	if err != nil || strings.Join(parts, ",") != "s1" {
		t.Fatalf("version 1: %q, %v", parts, err)
	}
	var ce *CorruptError
	if _, err := readGroups(writeVersion1(t, Header{Groups: []Group{{ID: 1}}, SnapshotBytes: 2}, "s1")); !errors.As(err, &ce) {
		t.Fatalf("a version 1 header with groups: %v, want a CorruptError", err)
	}
	d := bytes.Clone(b)
	binary.BigEndian.PutUint32(d[len(Magic):], Version+1)
	if _, err := NewReader(bytes.NewReader(d)); !errors.Is(err, ErrVersion) {
		t.Fatalf("version %d: %v, want ErrVersion", Version+1, err)
	}
}
