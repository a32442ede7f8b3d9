package log_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logd-dev/logd/log"
)

// openDeleted counts this process's open files under dir that are unlinked.
func openDeleted(t *testing.T, dir string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	n := 0
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir) && strings.HasSuffix(target, " (deleted)") {
			n++
		}
	}
	return n
}

// TestReleaseRetired: segments removed by DeleteBefore and replaced by a
// compaction keep their files open (so the appender does not pay for
// freeing them) until ReleaseRetired, and reads are unaffected.
func TestReleaseRetired(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, log.Options{SegmentBytes: 100, Sync: log.SyncNone})
	c := newClock()
	for i := range 6 {
		mustAppend(t, l, recBatch(trec{key: "k", ts: int64(i)}, trec{key: "k", ts: int64(i)}), c.meta(uint64(i+1)))
	}
	if n := len(l.Segments()); n < 4 {
		t.Fatalf("%d segments, want one per batch", n)
	}
	deleted, err := l.DeleteBefore(4)
	if err != nil || deleted != 2 {
		t.Fatalf("DeleteBefore: %d, %v", deleted, err)
	}
	cc, err := l.PrepareCompaction(log.CompactOptions{Below: l.Segments()[len(l.Segments())-1].BaseOffset, Codec: testCodec{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.CommitCompaction(cc); err != nil {
		t.Fatal(err)
	}
	// Each retired segment holds its data file open (the index files are
	// in memory, opened only to append).
	if n := openDeleted(t, dir); n != 2+cc.Stats().Segments {
		t.Fatalf("%d unlinked files open before release, want %d", n, 2+cc.Stats().Segments)
	}
	before := readAll(t, l)
	if err := l.ReleaseRetired(); err != nil {
		t.Fatal(err)
	}
	if n := openDeleted(t, dir); n != 0 {
		t.Fatalf("%d unlinked files open after release", n)
	}
	if after := readAll(t, l); len(after) != len(before) {
		t.Fatalf("read %d batches after release, %d before", len(after), len(before))
	}
	// Retired segments left at Close are closed too.
	if _, err := l.DeleteBefore(l.Segments()[1].BaseOffset); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := openDeleted(t, dir); n != 0 {
		t.Fatalf("%d unlinked files open after Close", n)
	}
}
