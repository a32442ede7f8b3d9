package fsm

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestSinceSnapshotReadTogether: the node bounds Raft's trailing entries
// by the average size of the entries since the last snapshot
// (SinceSnapshot). Read while a snapshot resets the counts, the entries
// and the bytes must come from the same side of the reset: entries from
// before it with bytes from after it read as entries of no size, and the
// node then kept every entry at that snapshot's compaction. Here every
// entry after the topic's creation is an append, so an entry counted
// without bytes is such a mixed read.
func TestSinceSnapshotReadTogether(t *testing.T) {
	f, fatals := testFSM(t, t.TempDir())
	f.apply(Entry{Index: 1, Command: true, Data: createCmd(t, "big", 1, 1)})
	value := strings.Repeat("x", 1<<10)
	// The topic's creation has no bytes: the reader starts after a
	// snapshot that covers it.
	index := uint64(1)
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	snap.Release()
	var done atomic.Bool
	var mixed atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for !done.Load() {
			if entries, bytes := f.SinceSnapshot(); entries > 0 && bytes == 0 {
				mixed.Add(1)
			}
		}
	})
	for range 2000 {
		index++
		f.apply(Entry{Index: index, Command: true, Data: encodeAppend(1, Append{Topic: "big", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, value)}}})})
		snap, err := f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		snap.Release()
	}
	done.Store(true)
	wg.Wait()
	if len(*fatals) > 0 {
		t.Fatal(*fatals)
	}
	if n := mixed.Load(); n > 0 {
		t.Errorf("%d reads counted entries since the snapshot without their bytes", n)
	}
}
