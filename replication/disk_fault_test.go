package replication

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/logd-dev/logd/log"
)

// faultFS is the operating system's file system with a switch: once armed,
// writes to data files (*.log) write half their bytes and fail with the
// armed error (a disk filling mid-batch), and syncs fail with it.
type faultFS struct {
	log.OSFS
	armed atomic.Pointer[error]
}

func (f *faultFS) arm(err error) { f.armed.Store(&err) }

func (f *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (log.File, error) {
	file, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, data: strings.HasSuffix(name, ".log")}, nil
}

type faultFile struct {
	log.File
	fs   *faultFS
	data bool
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.armed.Load(); err != nil && f.data {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, *err
	}
	return f.File.Write(p)
}

func (f *faultFile) Sync() error {
	if err := f.fs.armed.Load(); err != nil {
		return *err
	}
	return f.File.Sync()
}

// TestDiskFaultStopsNode is FAULTS.md T13 on one node: a partition log
// write failing with ENOSPC, or its fsync with EIO, inside Apply stops the
// node. The failing append is not acknowledged (its caller gets
// ErrStopped: the entry is committed, so its outcome is unknown), nothing
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
			disk := &faultFS{}
			var (
				mu     sync.Mutex
				fatals []error
			)
			open := func(fsys log.FS) *Node {
				n, err := Open(Config{
					NodeID: "n1", DataDir: dir, RaftBind: "127.0.0.1:0", Bootstrap: true, Logger: testLogger(),
					RaftLogLevel: "error", SyncPartitions: tc.sync, Log: log.Options{FS: fsys},
					Fatal: func(err error) { mu.Lock(); fatals = append(fatals, err); mu.Unlock() },
				})
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
			n := open(disk)
			if _, err := n.CreateTopic(ctx, CreateTopic{Name: "d", Partitions: 1}); err != nil {
				t.Fatal(err)
			}
			var want []string
			appendValues := func(values ...string) error {
				_, err := n.Append(ctx, Append{Topic: "d", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, values...)}}})
				return err
			}
			for i := range 3 {
				vs := []string{fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)}
				if err := appendValues(vs...); err != nil {
					t.Fatal(err)
				}
				want = append(want, vs...)
			}

			disk.arm(tc.err)
			if err := appendValues("failing-1", "failing-2"); !errors.Is(err, ErrStopped) {
				t.Fatalf("append on a failing disk: %v, want ErrStopped", err)
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
			if err := appendValues("after"); !errors.Is(err, ErrStopped) {
				t.Fatalf("append after the stop: %v, want ErrStopped", err)
			}
			n.Close()

			n = open(log.OSFS{})
			defer n.Close()
			if got := readAll(t, n.FSM(), "d", 0); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after the restart the partition holds\n%v\nwant\n%v", got, want)
			}
			if err := appendValues("later"); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, n.FSM(), "d", 0); len(got) != len(want)+1 || got[len(got)-1] != "later" {
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
