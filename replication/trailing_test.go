package replication

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/raftstore"
)

// TestTrailingLogsBoundedInBytes: with large entries, a snapshot leaves
// about TrailingBytes of Raft log behind it rather than TrailingLogs
// entries (raft-boltdb, which truncates entry by entry). With the count
// alone nothing of these 100 entries would be cut.
func TestTrailingLogsBoundedInBytes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := openSingleNode(t, ctx, Config{DataDir: t.TempDir(), RaftLogStore: raftstore.LogStoreBoltDB,
		TrailingBytes: 256 << 10, SnapshotBytes: 1 << 30, SnapshotThreshold: 1 << 20, SnapshotInterval: time.Hour})
	defer n.Close()
	if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "big", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	value := strings.Repeat("x", 16<<10)
	for range 100 {
		if _, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "big", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, value)}}}); err != nil {
			t.Fatal(err)
		}
	}
	// 16 KiB entries in a 256 KiB budget: 16 entries.
	// Raft's TrailingLogs, which the housekeeping goroutine lowers.
	trailing := func() uint64 { return n.raft.ReloadableConfig().TrailingLogs }
	for trailing() != raftstore.MinTrailingLogs {
		select {
		case <-ctx.Done():
			t.Fatalf("trailing logs %d, want %d", trailing(), raftstore.MinTrailingLogs)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	first, err := n.stores.logs.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	last, err := n.stores.logs.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	if kept := last - first + 1; kept > 2*raftstore.MinTrailingLogs {
		t.Fatalf("the snapshot left %d entries (%d..%d) of 16 KiB, want about %d", kept, first, last, raftstore.MinTrailingLogs)
	}
}
