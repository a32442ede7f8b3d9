package raftstore

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// openBenchLogStore opens a log store of kind store under b's temporary
// directory, as Open would, and closes it when b ends.
func openBenchLogStore(b *testing.B, store string) raft.LogStore {
	b.Helper()
	raftDir := b.TempDir()
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(raftDir, "raft.db"),
		BoltOptions: &bbolt.Options{Timeout: 5 * time.Second, FreelistType: bbolt.FreelistMapType, NoFreelistSync: true}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bolt.Close() })
	if store == LogStoreBoltDB {
		return bolt
	}
	w, err := openWAL(raftDir, 0, hclog.NewNullLogger(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { w.Close() })
	return w
}

// benchEntries are n entries of size bytes each from index first.
func benchEntries(first uint64, n, size int) []*raft.Log {
	data := make([]byte, size)
	logs := make([]*raft.Log, n)
	for i := range logs {
		logs[i] = &raft.Log{Index: first + uint64(i), Term: 1, Type: raft.LogCommand, Data: data}
	}
	return logs
}

// BenchmarkLogStoreStoreLogs measures one StoreLogs call of a group of
// entries (what Raft writes, and fsyncs, per group commit) in each log
// store: entries of 128 B and 1 KiB (one record each, plus a little
// framing), and of 64 KiB (a batch of records per entry).
func BenchmarkLogStoreStoreLogs(b *testing.B) {
	for _, store := range []string{LogStoreBoltDB, LogStoreWAL} {
		for _, size := range []int{128, 1024, 64 << 10} {
			for _, group := range []int{1, 64} {
				b.Run(fmt.Sprintf("store=%s/entry=%d/group=%d", store, size, group), func(b *testing.B) {
					s := openBenchLogStore(b, store)
					next := uint64(1)
					b.SetBytes(int64(size * group))
					b.ResetTimer()
					for range b.N {
						if err := s.StoreLogs(benchEntries(next, group, size)); err != nil {
							b.Fatal(err)
						}
						next += uint64(group)
					}
				})
			}
		}
	}
}

// BenchmarkLogStoreTruncate measures the compaction after a snapshot: a
// log of 64 Ki entries of 1 KiB has all but a node's default TrailingLogs
// (512) deleted from its head, one DeleteRange as Raft makes it.
func BenchmarkLogStoreTruncate(b *testing.B) {
	const entries, size, trailing = 64 << 10, 1024, 512
	for _, store := range []string{LogStoreBoltDB, LogStoreWAL} {
		b.Run("store="+store, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				s := openBenchLogStore(b, store)
				for first := uint64(1); first <= entries; first += 1024 {
					if err := s.StoreLogs(benchEntries(first, 1024, size)); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				if err := s.DeleteRange(1, entries-trailing); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
