package log_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/logd-dev/logd/log"
)

// leaderLog builds a log of n 200-byte batches in 1000-byte segments.
func leaderLog(t *testing.T, n int) (string, *log.Log) {
	t.Helper()
	dir := t.TempDir()
	clk := newClock()
	l := mustOpen(t, dir, log.Options{SegmentBytes: 1000, Now: clk.Now})
	for i := range n {
		mustAppend(t, l, makeBatch(batch{payload: payload(i, 139)}), clk.meta(uint64(10+i)))
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	return dir, l
}

// stage copies the leader's segment s into dir.
func stage(t *testing.T, leaderDir, dir string, s log.SegmentInfo, mangle func([]byte) []byte) error {
	t.Helper()
	dataPath, metaPath := log.SegmentFiles(leaderDir, s.BaseOffset)
	meta, err := os.ReadFile(metaPath)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(dataPath)
	if err != nil {
		t.Fatal(err)
	}
	data = data[:s.Bytes]
	if mangle != nil {
		data = mangle(bytes.Clone(data))
	}
	return log.StageSegment(dir, log.Options{}, s, meta, bytes.NewReader(data))
}

func fileSums(t *testing.T, dir string, segs []log.SegmentInfo) [][32]byte {
	t.Helper()
	var out [][32]byte
	for _, s := range segs {
		for _, p := range []string{segFile(dir, s.BaseOffset, ".log"), segFile(dir, s.BaseOffset, ".meta")} {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, sha256.Sum256(b))
		}
	}
	return out
}

func TestInstallStagedCatchesUp(t *testing.T) {
	leaderDir, leader := leaderLog(t, 23) // 5 batches per segment: 5 segments
	want := leader.Segments()

	// A follower that holds the first 7 batches, then is replaced from the
	// second segment on (its active segment is only a prefix there).
	dir := t.TempDir()
	clk := newClock()
	f := mustOpen(t, dir, log.Options{SegmentBytes: 1000, Now: clk.Now})
	for i := range 7 {
		mustAppend(t, f, makeBatch(batch{payload: payload(i, 139)}), clk.meta(uint64(10+i)))
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var staged []int64
	for _, s := range want[1:] {
		if err := stage(t, leaderDir, dir, s, nil); err != nil {
			t.Fatal(err)
		}
		staged = append(staged, s.BaseOffset)
	}
	if err := log.InstallStaged(dir, log.Options{}, []int64{want[0].BaseOffset}, staged); err != nil {
		t.Fatal(err)
	}
	f2 := mustOpen(t, dir, log.Options{SegmentBytes: 1000})
	if f2.EndOffset() != leader.EndOffset() || f2.AppliedIndex() != leader.AppliedIndex() {
		t.Fatalf("after install: end %d applied %d, want %d %d", f2.EndOffset(), f2.AppliedIndex(), leader.EndOffset(), leader.AppliedIndex())
	}
	if got, w := fileSums(t, dir, f2.Segments()), fileSums(t, leaderDir, want); len(got) != len(w) {
		t.Fatalf("%d files, want %d", len(got), len(w))
	} else {
		for i := range got {
			if got[i] != w[i] {
				t.Fatalf("file %d differs from the leader's", i)
			}
		}
	}
	if g, w := readAll(t, f2), readAll(t, leader); len(g) != len(w) {
		t.Fatalf("read %d batches, want %d", len(g), len(w))
	}
	// The follower appends on from there like the leader.
	mustAppend(t, f2, makeBatch(batch{payload: payload(99, 139)}), log.AppendMeta{AppliedIndex: 100})
}

func TestStageSegmentRefusesBadCopies(t *testing.T) {
	leaderDir, leader := leaderLog(t, 8)
	s := leader.Segments()[0]
	for _, tc := range []struct {
		name   string
		want   func(log.SegmentInfo) log.SegmentInfo
		mangle func([]byte) []byte
		check  func(error) bool
	}{
		{name: "bit flip", mangle: func(b []byte) []byte { b[300] ^= 1; return b }, check: isCorrupt},
		{name: "short", mangle: func(b []byte) []byte { return b[:len(b)-10] }, check: func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
		{name: "wrong end", want: func(s log.SegmentInfo) log.SegmentInfo { s.EndOffset++; return s }, check: isCorrupt},
		{name: "wrong base", want: func(s log.SegmentInfo) log.SegmentInfo { s.BaseOffset = 1; return s }, check: isCorrupt},
		{name: "size cuts a batch", want: func(s log.SegmentInfo) log.SegmentInfo { s.Bytes -= 10; return s }, check: isCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := s
			if tc.want != nil {
				w = tc.want(s)
			}
			dataPath, metaPath := log.SegmentFiles(leaderDir, s.BaseOffset)
			meta, _ := os.ReadFile(metaPath)
			data, _ := os.ReadFile(dataPath)
			data = data[:s.Bytes]
			if tc.mangle != nil {
				data = tc.mangle(bytes.Clone(data))
			}
			err := log.StageSegment(t.TempDir(), log.Options{}, w, meta, bytes.NewReader(data))
			if err == nil || !tc.check(err) {
				t.Fatalf("got %v", err)
			}
		})
	}
}

// An install interrupted after staging (or halfway through its renames)
// leaves a log that opens cleanly as a prefix; a second install converges.
func TestInstallInterrupted(t *testing.T) {
	leaderDir, leader := leaderLog(t, 12)
	want := leader.Segments()
	dir := t.TempDir()
	if err := stage(t, leaderDir, dir, want[0], nil); err != nil {
		t.Fatal(err)
	}
	// Killed before InstallStaged: Open ignores and removes staged files.
	l := mustOpen(t, dir, log.Options{SegmentBytes: 1000})
	if l.EndOffset() != 0 {
		t.Fatalf("end %d after an interrupted stage", l.EndOffset())
	}
	l.Close()
	// Killed after installing the first segment only.
	for _, s := range want {
		if err := stage(t, leaderDir, dir, s, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.InstallStaged(dir, log.Options{}, nil, []int64{want[0].BaseOffset}); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, log.Options{SegmentBytes: 1000})
	if l.EndOffset() != want[0].EndOffset {
		t.Fatalf("end %d, want %d", l.EndOffset(), want[0].EndOffset)
	}
	l.Close()
	var rest []int64
	for _, s := range want[1:] {
		if err := stage(t, leaderDir, dir, s, nil); err != nil {
			t.Fatal(err)
		}
		rest = append(rest, s.BaseOffset)
	}
	if err := log.DiscardStaged(dir, log.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := log.InstallStaged(dir, log.Options{}, []int64{0}, rest); err == nil {
		t.Fatal("installed discarded segments")
	}
	for _, s := range want[1:] {
		if err := stage(t, leaderDir, dir, s, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.InstallStaged(dir, log.Options{}, []int64{0}, rest); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, log.Options{SegmentBytes: 1000})
	if l.EndOffset() != leader.EndOffset() {
		t.Fatalf("end %d, want %d", l.EndOffset(), leader.EndOffset())
	}
}
