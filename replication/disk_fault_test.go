package replication

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/log/logtest"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
)

// openSingleNode opens cfg (its data dir, logs, sync and fatal handler) as
// a bootstrapped single-node cluster and waits until it leads and has
// caught up.
func openSingleNode(t *testing.T, ctx context.Context, cfg Config) *Node {
	t.Helper()
	cfg.NodeID, cfg.RaftBind, cfg.Bootstrap, cfg.Logger, cfg.RaftLogLevel = "n1", "127.0.0.1:0", true, fsmtest.Logger(), "error"
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for !n.IsLeader() || !n.Ready() {
		select {
		case <-ctx.Done():
			n.Close()
			t.Fatal("no leader, or not caught up")
		case <-time.After(10 * time.Millisecond):
		}
	}
	return n
}

// TestDiskFaultStopsNode: a disk fault on one node. A partition log
// write failing with ENOSPC, or its fsync with EIO, inside Apply stops the
// node. The failing append is not acknowledged (its caller gets
// backend.ErrStopped: the entry is committed, so its outcome is unknown), nothing
// after it is applied, and after a restart on a healthy disk the Raft log
// replays it: the partition holds every acknowledged record and the
// failing batch exactly once, whole, at dense offsets.
func TestDiskFaultStopsNode(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		sync bool
	}{
		{"ENOSPC on write", syscall.ENOSPC, false},
		{"EIO on fsync", syscall.EIO, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			dir := t.TempDir()
			disk := logtest.Wrap(log.OSFS{})
			var (
				mu     sync.Mutex
				fatals []error
			)
			open := func(fsys log.FS) *Node {
				return openSingleNode(t, ctx, Config{DataDir: dir, SyncPartitions: tc.sync, Log: log.Options{FS: fsys},
					Fatal: func(err error) { mu.Lock(); fatals = append(fatals, err); mu.Unlock() }})
			}
			n := open(disk)
			if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "d", Partitions: 1}); err != nil {
				t.Fatal(err)
			}
			var want []string
			appendValues := func(values ...string) error {
				_, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "d", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, values...)}}})
				return err
			}
			for i := range 3 {
				vs := []string{fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)}
				if err := appendValues(vs...); err != nil {
					t.Fatal(err)
				}
				want = append(want, vs...)
			}

			// A disk filling mid-batch: data file writes store half their
			// bytes and fail; every sync fails.
			disk.Inject(logtest.Fault{Op: logtest.OpWrite, Err: tc.err, Keep: logtest.KeepHalf, Match: logtest.HasSuffix(".log")},
				logtest.Fault{Op: logtest.OpSync, Err: tc.err})
			if err := appendValues("failing-1", "failing-2"); !errors.Is(err, backend.ErrStopped) {
				t.Fatalf("append on a failing disk: %v, want backend.ErrStopped", err)
			}
			want = append(want, "failing-1", "failing-2") // committed: replayed after the restart
			mu.Lock()
			if len(fatals) != 1 || !errors.Is(fatals[0], tc.err) {
				t.Fatalf("fatal errors %v, want one wrapping %v", fatals, tc.err)
			}
			mu.Unlock()
			if err := n.FSM().Failed(); !errors.Is(err, tc.err) {
				t.Fatalf("Failed() = %v", err)
			}
			if err := appendValues("after"); !errors.Is(err, backend.ErrStopped) {
				t.Fatalf("append after the stop: %v, want backend.ErrStopped", err)
			}
			n.Close()

			n = open(log.OSFS{})
			defer n.Close()
			if got := fsmtest.ReadAll(t, n.FSM(), "d", 0); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after the restart the partition holds\n%v\nwant\n%v", got, want)
			}
			if err := appendValues("later"); err != nil {
				t.Fatal(err)
			}
			if got := fsmtest.ReadAll(t, n.FSM(), "d", 0); len(got) != len(want)+1 || got[len(got)-1] != "later" {
				t.Fatalf("after an append on the healthy disk: %v", got)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(fatals) != 1 {
				t.Fatalf("fatal errors after the restart: %v", fatals[1:])
			}
		})
	}
}

// TestPowerCutAfterSnapshot: a power cut on one node, for the partition
// logs (written without fsync by default; the Raft log is fsynced): appends
// before a snapshot whose Raft entries the snapshot let Raft delete must be
// on disk, because Persist syncs every partition first. A power cut then
// loses only unsynced partition bytes, which the Raft log replays. The test
// fails if Persist does not sync.
func TestPowerCutAfterSnapshot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	// Directory entries count as durable: the node shares the directory
	// with code that does not go through log.FS.
	disk := logtest.Wrap(log.OSFS{})
	open := func(fsys log.FS) *Node {
		return openSingleNode(t, ctx, Config{DataDir: dir, TrailingLogs: 1, Log: log.Options{FS: fsys},
			Fatal: func(err error) { t.Errorf("fatal: %v", err) }})
	}
	n := open(disk)
	if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "p", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	want := map[int32][]string{}
	appendValues := func(part int32, values ...string) {
		t.Helper()
		if _, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "p", Batches: []fsm.PartitionBatch{{Partition: part, Batch: mustBatch(t, values...)}}}); err != nil {
			t.Fatal(err)
		}
		want[part] = append(want[part], values...)
	}
	for i := range 6 {
		appendValues(int32(i%2), fmt.Sprintf("before-%d", i), fmt.Sprintf("before-%d'", i))
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		appendValues(int32(i%2), fmt.Sprintf("after-%d", i))
	}
	disk.CutPower() // the syncs of Close do not happen in a crash
	n.Close()
	dropped, err := disk.DropUnsynced()
	if err != nil {
		t.Fatal(err)
	}
	if dropped == 0 {
		t.Fatal("the cut dropped nothing: the appends after the snapshot were synced, so the test proves nothing")
	}

	n = open(log.OSFS{})
	defer n.Close()
	for part := range int32(2) {
		if got := fsmtest.ReadAll(t, n.FSM(), "p", part); fmt.Sprint(got) != fmt.Sprint(want[part]) {
			t.Fatalf("partition %d after the power cut:\n got %v\nwant %v", part, got, want[part])
		}
	}
}
