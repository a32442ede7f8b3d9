package replication

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
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
	n, err := Open(Config{NodeID: "n1", DataDir: t.TempDir(), RaftBind: "127.0.0.1:0", Bootstrap: true,
		Logger: fsmtest.Logger(), RaftLogLevel: "error", DataGroupsPerNode: 1,
		SnapshotBytes: 256 << 10, TrailingLogs: 4, TrailingBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	describe := func() string { return fmt.Sprintf("replicas %+v", n.DataGroupReplicas()) }
	waitFor(ctx, t, "a node leading its data group", func() bool {
		return n.IsLeader() && n.Ready() && len(n.DataGroupReplicas()) == 1 && leadsAll(n)
	}, describe)
	bk := NewBackend(n)
	if _, err := bk.CreateTopic(ctx, backend.CreateTopic{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	mt, err := n.FSM().Topic("t")
	if err != nil || mt.Placement == nil {
		t.Fatalf("topic t: %+v, %v: want it placed in a data group", mt, err)
	}
	dg := n.dataGroup(mt.Placement[0])
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
