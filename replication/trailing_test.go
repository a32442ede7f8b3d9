package replication

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/replication/raftstore"
)

func TestTrailingLogsFor(t *testing.T) {
	for _, c := range []struct {
		bytes   int64
		entries uint64
		budget  int64
		most    uint64
		want    uint64
	}{
		{bytes: 128 * 1000, entries: 1000, budget: 64 << 20, most: 512, want: 512},       // small entries: the count rules
		{bytes: 5_000_000 * 40, entries: 40, budget: 64 << 20, most: 512, want: 16},      // 5 MB calls: at least minTrailingLogs
		{bytes: 1 << 30, entries: 4096, budget: 64 << 20, most: 512, want: 256},          // 256 KiB entries
		{bytes: 1 << 30, entries: 4096, budget: -1, most: 512, want: 512},                // bytes bound off
		{bytes: 0, entries: 100, budget: 64 << 20, most: 512, want: 512},                 // no appends since
		{bytes: 5_000_000 * 40, entries: 40, budget: 64 << 20, most: 8, want: 8},         // a count below the minimum stays
		{bytes: 1 << 40, entries: 1, budget: 64 << 20, most: 512, want: minTrailingLogs}, // one huge entry
	} {
		if got := trailingLogsFor(c.bytes, c.entries, c.budget, c.most); got != c.want {
			t.Errorf("trailingLogsFor(%d, %d, %d, %d) = %d, want %d", c.bytes, c.entries, c.budget, c.most, got, c.want)
		}
	}
	for _, c := range []struct {
		cur, want uint64
		changed   bool
	}{{512, 512, false}, {512, 480, false}, {512, 300, true}, {300, 512, true}, {20, 16, true}, {100, 90, false}} {
		if got := trailingChanged(c.cur, c.want, 512); got != c.changed {
			t.Errorf("trailingChanged(%d, %d) = %v, want %v", c.cur, c.want, got, c.changed)
		}
	}
}

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
	if _, err := n.CreateTopic(ctx, CreateTopic{Name: "big", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	value := strings.Repeat("x", 16<<10)
	for range 100 {
		if _, err := n.Append(ctx, Append{Topic: "big", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, value)}}}); err != nil {
			t.Fatal(err)
		}
	}
	// 16 KiB entries in a 256 KiB budget: 16 entries.
	for n.trailingLogs() != minTrailingLogs {
		select {
		case <-ctx.Done():
			t.Fatalf("trailing logs %d, want %d", n.trailingLogs(), minTrailingLogs)
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
	if kept := last - first + 1; kept > 2*minTrailingLogs {
		t.Fatalf("the snapshot left %d entries (%d..%d) of 16 KiB, want about %d", kept, first, last, minTrailingLogs)
	}
}
