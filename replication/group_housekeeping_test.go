package replication

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
)

// TestDataGroupSnapshotsBySize: a data group replica takes a snapshot
// once SnapshotBytes of appends were applied since its last one, as the
// meta group does, and Raft then compacts its log. Before, only Raft's
// own trigger (SnapshotThreshold entries, 8,192) took one, so a group of
// large entries kept gigabytes of Raft log and replayed them at every
// restart.
func TestDataGroupSnapshotsBySize(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, bk, _ := leadingDataNode(ctx, t, func(cfg *Config) {
		cfg.DataGroupsPerNode, cfg.SnapshotBytes, cfg.TrailingLogs, cfg.TrailingBytes = 1, 256<<10, 4, -1
	})
	dg := placedTopic(ctx, t, n, "t")
	snapshots := func() int {
		l, err := dg.stores.snaps.List()
		if err != nil {
			t.Fatal(err)
		}
		return len(l)
	}
	if s := snapshots(); s != 0 {
		t.Fatalf("the group has %d snapshots before any append", s)
	}
	// 1 MiB in 32 entries of 32 KiB: four times SnapshotBytes, far below
	// Raft's SnapshotThreshold of entries.
	value := bytes.Repeat([]byte("v"), 32<<10)
	for range 32 {
		if _, err := bk.Produce(ctx, backend.ProduceRequest{Topic: "t", Records: []backend.ProduceRecord{{Partition: 0, HasPartition: true, Value: value}}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(ctx, t, "a snapshot of the data group, its log compacted", func() bool {
		first, err := dg.stores.logs.FirstIndex()
		return err == nil && snapshots() > 0 && first > 1
	}, func() string {
		first, _ := dg.stores.logs.FirstIndex()
		last, _ := dg.stores.logs.LastIndex()
		return fmt.Sprintf("%d snapshots, log %d-%d, %d bytes since the last", snapshots(), first, last, dg.fsm.BytesSinceSnapshot())
	})
	if since := dg.fsm.BytesSinceSnapshot(); since >= 1<<20 {
		t.Fatalf("%d bytes of appends since the last snapshot: every append is still there", since)
	}
}
