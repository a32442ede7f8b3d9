package raftstore

import (
	"bytes"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
)

// openTestWAL opens a WAL in dir as openWAL does (walSegmentFiler), with
// segments of segSize bytes so a test can seal many.
func openTestWAL(t *testing.T, dir string, segSize int) *wal.WAL {
	t.Helper()
	w, err := wal.Open(dir, wal.WithLogger(hclog.NewNullLogger()),
		wal.WithSegmentFiler(walSegmentFiler(dir, walfs.New())), wal.WithSegmentSize(segSize))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// walEntry is entry i's data: size bytes that name i and term.
func walEntry(i, term uint64, size int) []byte {
	b := bytes.Repeat([]byte{byte(i), byte(term)}, size/2)
	copy(b, fmt.Sprintf("e%d.%d.", i, term))
	return b
}

func storeWAL(t *testing.T, w raft.LogStore, from, to, term uint64, perCall, size int) {
	t.Helper()
	for i := from; i <= to; {
		var logs []*raft.Log
		for ; i <= to && len(logs) < perCall; i++ {
			logs = append(logs, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: walEntry(i, term, size)})
		}
		if err := w.StoreLogs(logs); err != nil {
			t.Fatalf("store %d..%d: %v", logs[0].Index, logs[len(logs)-1].Index, err)
		}
	}
}

// checkWAL reads entries from..to back and compares them with what
// storeWAL wrote at term (terms[i] if set).
func checkWAL(t *testing.T, w raft.LogStore, from, to uint64, terms map[uint64]uint64, size int) {
	t.Helper()
	for i := from; i <= to; i++ {
		term := terms[i]
		var l raft.Log
		if err := w.GetLog(i, &l); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if l.Index != i || l.Term != term || !bytes.Equal(l.Data, walEntry(i, term, size)) {
			t.Fatalf("entry %d: index %d term %d data %.12q, want term %d", i, l.Index, l.Term, l.Data, term)
		}
	}
}

func walSegmentFiles(t *testing.T, dir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// walTailBase is the base index of the newest segment file in dir
// (raft-wal names them BASE-ID.wal).
func walTailBase(t *testing.T, dir string) uint64 {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil || len(m) == 0 {
		t.Fatalf("segment files: %v, %v", m, err)
	}
	var base, id, tail, tailID uint64
	for _, f := range m {
		if _, err := fmt.Sscanf(filepath.Base(f), "%020d-%016x.wal", &base, &id); err != nil {
			t.Fatalf("segment file %s: %v", f, err)
		}
		if id > tailID {
			tail, tailID = base, id
		}
	}
	return tail
}

func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestWALSealedSegmentsReleased: segments Raft still holds keep no write
// buffer once sealed. Each StoreLogs below is 600 KiB, so each segment's
// writer grows a 1 MiB commit buffer, and two fill a segment: the 30
// sealed segments, kept as writers, would hold 30 MiB of them.
func TestWALSealedSegmentsReleased(t *testing.T) {
	const (
		segSize = 1 << 20
		size    = 300 << 10
		entries = 120
	)
	dir := t.TempDir()
	w := openTestWAL(t, dir, segSize)
	defer w.Close()
	before := heapAfterGC()
	storeWAL(t, w, 1, entries, 1, 2, size)
	after := heapAfterGC()
	if n := walSegmentFiles(t, dir); n < 20 {
		t.Fatalf("%d segment files, want at least 20: the test no longer seals what it means to", n)
	}
	grown := int64(after) - int64(before)
	t.Logf("heap after storing %d MiB in %d segments: %+d KiB", entries*size>>20, walSegmentFiles(t, dir), grown>>10)
	if grown > 8<<20 {
		t.Errorf("the heap grew by %d MiB while storing; sealed segments keep their writers' buffers", grown>>20)
	}
	terms := map[uint64]uint64{}
	for i := uint64(1); i <= entries; i++ {
		terms[i] = 1
	}
	checkWAL(t, w, 1, entries, terms, size)
}

// TestWALSealedSegmentsReadAndTruncate: entries of released segments are
// read back while new ones are written, after Raft deletes a prefix (a
// snapshot's compaction) and a suffix (a follower's conflicting entries,
// which force-seals the tail), and after a restart.
func TestWALSealedSegmentsReadAndTruncate(t *testing.T) {
	const (
		segSize = 64 << 10
		size    = 6 << 10
	)
	dir := t.TempDir()
	w := openTestWAL(t, dir, segSize)
	terms := map[uint64]uint64{}
	set := func(from, to, term uint64) {
		for i := from; i <= to; i++ {
			terms[i] = term
		}
	}

	// Readers of earlier entries while segments are sealed and released.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	readErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; n < 100000; n++ {
			select {
			case <-stop:
				return
			default:
			}
			last, err := w.LastIndex()
			if err != nil || last == 0 {
				continue
			}
			i := 1 + uint64(n)%last
			var l raft.Log
			if err := w.GetLog(i, &l); err != nil || !bytes.Equal(l.Data, walEntry(i, 1, size)) {
				readErr <- fmt.Errorf("entry %d while writing: %.12q, %v", i, l.Data, err)
				return
			}
		}
	}()
	storeWAL(t, w, 1, 200, 1, 3, size)
	close(stop)
	wg.Wait()
	select {
	case err := <-readErr:
		t.Fatal(err)
	default:
	}
	set(1, 200, 1)
	if n := walSegmentFiles(t, dir); n < 10 {
		t.Fatalf("%d segment files, want at least 10", n)
	}
	checkWAL(t, w, 1, 200, terms, size)

	// A prefix goes (closing released readers), then a suffix in the
	// middle of the tail segment: the tail is force-sealed and released.
	last := uint64(200)
	tailBase := walTailBase(t, dir)
	if tailBase+2 > last {
		storeWAL(t, w, last+1, tailBase+4, 1, 1, size)
		set(last+1, tailBase+4, 1)
		last = tailBase + 4
	}
	if err := w.DeleteRange(1, 120); err != nil {
		t.Fatal(err)
	}
	cut := tailBase + 2
	if err := w.DeleteRange(cut, last); err != nil {
		t.Fatal(err)
	}
	if got := walTailBase(t, dir); got != cut {
		t.Fatalf("after deleting %d..%d the tail segment starts at %d, want %d (the old tail force-sealed)", cut, last, got, cut)
	}
	checkWAL(t, w, 121, cut-1, terms, size)
	storeWAL(t, w, cut, 230, 2, 2, size)
	set(cut, 230, 2)
	checkWAL(t, w, 121, 230, terms, size)
	var l raft.Log
	if err := w.GetLog(100, &l); err == nil {
		t.Fatalf("entry 100 after deleting 1..120: %.12q", l.Data)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	w = openTestWAL(t, dir, segSize)
	defer w.Close()
	first, err := w.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	last, err = w.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	if first > 121 || last != 230 {
		t.Fatalf("after the restart the log holds %d..%d, want up to 230 from 121 or earlier", first, last)
	}
	checkWAL(t, w, 121, 230, terms, size)
	storeWAL(t, w, 231, 300, 2, 4, size)
	set(231, 300, 2)
	checkWAL(t, w, 121, 300, terms, size)
}
