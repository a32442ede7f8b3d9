package raftstore

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// countingStore counts the reads that reach the store under the cache,
// and fails writes while failWrites is set.
type countingStore struct {
	*raft.InmemStore
	reads      int
	failWrites bool
}

func (s *countingStore) GetLog(i uint64, l *raft.Log) error {
	s.reads++
	return s.InmemStore.GetLog(i, l)
}

func (s *countingStore) StoreLogs(logs []*raft.Log) error {
	if s.failWrites {
		return errors.New("disk full")
	}
	return s.InmemStore.StoreLogs(logs)
}

func (s *countingStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func raftEntries(from, to uint64, size int, tag string) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		d := make([]byte, size)
		copy(d, fmt.Sprintf("%s%d", tag, i))
		out = append(out, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: d})
	}
	return out
}

func TestRecentLogs(t *testing.T) {
	type step struct {
		store      []*raft.Log
		deleteTo   uint64 // DeleteRange(deleteFrom, deleteTo) when set
		deleteFrom uint64
		failWrite  bool
		// get reads these indexes; wantTag is the tag each must carry and
		// wantReads how many of them reach the store.
		get       []uint64
		wantTag   string
		wantReads int
	}
	// The budget holds four entries of 1000 bytes (with the overhead).
	budget := 4 * (1000 + recentLogOverhead)
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "newest entries from memory", steps: []step{
			{store: raftEntries(1, 3, 1000, "a"), get: []uint64{1, 2, 3}, wantTag: "a", wantReads: 0},
		}},
		{name: "older than the budget from the store", steps: []step{
			{store: raftEntries(1, 6, 1000, "a"), get: []uint64{1, 2, 3, 4, 5, 6}, wantTag: "a", wantReads: 2},
		}},
		{name: "batches stored one after another", steps: []step{
			{store: raftEntries(1, 2, 1000, "a")},
			{store: raftEntries(3, 5, 1000, "a"), get: []uint64{1, 2, 3, 4, 5}, wantTag: "a", wantReads: 1},
		}},
		{name: "a truncated suffix is not served", steps: []step{
			{store: raftEntries(1, 4, 1000, "a")},
			{deleteFrom: 3, deleteTo: 4},
			{store: raftEntries(3, 4, 1000, "b"), get: []uint64{3, 4}, wantTag: "b", wantReads: 0},
			{get: []uint64{1, 2}, wantTag: "a", wantReads: 2},
		}},
		{name: "a gap empties the cache", steps: []step{
			{store: raftEntries(1, 2, 1000, "a")},
			{store: raftEntries(10, 11, 1000, "a"), get: []uint64{1, 2, 10, 11}, wantTag: "a", wantReads: 2},
		}},
		{name: "a failed write empties the cache", steps: []step{
			{store: raftEntries(1, 2, 1000, "a")},
			{store: raftEntries(3, 3, 1000, "a"), failWrite: true, get: []uint64{1, 2}, wantTag: "a", wantReads: 2},
		}},
		{name: "an entry over the budget is read from the store", steps: []step{
			{store: raftEntries(1, 1, 10*budget, "a"), get: []uint64{1}, wantTag: "a", wantReads: 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inner := &countingStore{InmemStore: raft.NewInmemStore()}
			c := CacheRecent(inner, budget)
			for i, s := range tt.steps {
				if s.store != nil {
					inner.failWrites = s.failWrite
					err := c.StoreLogs(s.store)
					if (err != nil) != s.failWrite {
						t.Fatalf("step %d: StoreLogs: %v", i, err)
					}
					inner.failWrites = false
				}
				if s.deleteTo != 0 {
					if err := c.DeleteRange(s.deleteFrom, s.deleteTo); err != nil {
						t.Fatalf("step %d: DeleteRange: %v", i, err)
					}
				}
				inner.reads = 0
				for _, idx := range s.get {
					var l raft.Log
					if err := c.GetLog(idx, &l); err != nil {
						t.Fatalf("step %d: GetLog(%d): %v", i, idx, err)
					}
					if want := fmt.Sprintf("%s%d", s.wantTag, idx); l.Index != idx || string(l.Data[:len(want)]) != want {
						t.Fatalf("step %d: GetLog(%d) = index %d data %q, want %q", i, idx, l.Index, l.Data[:len(want)], want)
					}
				}
				if inner.reads != s.wantReads {
					t.Fatalf("step %d: %d reads reached the store, want %d", i, inner.reads, s.wantReads)
				}
			}
		})
	}
}

func TestRecentLogsOff(t *testing.T) {
	inner := raft.NewInmemStore()
	if got := CacheRecent(inner, -1); got != raft.LogStore(inner) {
		t.Fatalf("a negative budget wraps the store: %T", got)
	}
}

// BenchmarkRecentLogs measures what Raft pays to read an entry it has just
// written, as a leader does once per follower to send it and a follower
// once to apply it: from raft-boltdb, and from the recent entries in
// memory. Entries are 700 KB, about 5000 records of 128 bytes.
func BenchmarkRecentLogs(b *testing.B) {
	for _, budget := range []int{-1, DefaultRecentLogBytes} {
		b.Run(fmt.Sprintf("cached=%v", budget > 0), func(b *testing.B) {
			store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(b.TempDir(), "raft.db"), NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			logs := CacheRecent(store, budget)
			const n = 16
			if err := logs.StoreLogs(raftEntries(1, n, 700_000, "e")); err != nil {
				b.Fatal(err)
			}
			var l raft.Log
			for i := 0; b.Loop(); i++ {
				if err := logs.GetLog(uint64(1+i%n), &l); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
