package replication

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
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

// openSingleNode opens cfg (its data dir, logs, sync and fatal handler) as
// a bootstrapped single-node cluster and waits until it leads and has
// caught up.
func openSingleNode(t *testing.T, ctx context.Context, cfg Config) *Node {
	t.Helper()
	cfg.NodeID, cfg.RaftBind, cfg.Bootstrap, cfg.Logger, cfg.RaftLogLevel = "n1", "127.0.0.1:0", true, testLogger(), "error"
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
				return openSingleNode(t, ctx, Config{DataDir: dir, SyncPartitions: tc.sync, Log: log.Options{FS: fsys},
					Fatal: func(err error) { mu.Lock(); fatals = append(fatals, err); mu.Unlock() }})
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

// cutFS is the operating system's file system that can lose power: it
// remembers how much of each file was synced, and cut truncates every file
// to that (unsynced bytes are what a power cut loses; directory entries
// are assumed durable). Between freeze and cut, syncs no longer count: a
// clean shutdown's syncs do not happen in a crash.
type cutFS struct {
	log.OSFS
	mu     sync.Mutex
	synced map[string]int64
	frozen bool
}

func (c *cutFS) OpenFile(name string, flag int, perm fs.FileMode) (log.File, error) {
	f, err := c.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.synced[name]; !ok {
		size := int64(0)
		if flag&os.O_CREATE == 0 || flag&os.O_TRUNC == 0 {
			if st, err := f.Stat(); err == nil {
				size = st.Size() // there before: durable as far as this test knows
			}
		}
		c.synced[name] = size
	}
	return &cutFile{File: f, fs: c, name: name}, nil
}

func (c *cutFS) freeze() { c.mu.Lock(); c.frozen = true; c.mu.Unlock() }

// cut truncates every file to its synced size and reports how many bytes
// were dropped.
func (c *cutFS) cut(t *testing.T) int64 {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var dropped int64
	for name, size := range c.synced {
		st, err := os.Stat(name)
		if err != nil {
			continue // removed: retention, a roll's cleanup
		}
		if st.Size() > size {
			dropped += st.Size() - size
			if err := os.Truncate(name, size); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dropped
}

type cutFile struct {
	log.File
	fs   *cutFS
	name string
}

func (f *cutFile) Sync() error {
	if err := f.File.Sync(); err != nil {
		return err
	}
	st, err := f.File.Stat()
	if err != nil {
		return err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if !f.fs.frozen {
		f.fs.synced[f.name] = st.Size()
	}
	return nil
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
	disk := &cutFS{synced: map[string]int64{}}
	open := func(fsys log.FS) *Node {
		return openSingleNode(t, ctx, Config{DataDir: dir, TrailingLogs: 1, Log: log.Options{FS: fsys},
			Fatal: func(err error) { t.Errorf("fatal: %v", err) }})
	}
	n := open(disk)
	if _, err := n.CreateTopic(ctx, CreateTopic{Name: "p", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	want := map[int32][]string{}
	appendValues := func(part int32, values ...string) {
		t.Helper()
		if _, err := n.Append(ctx, Append{Topic: "p", Batches: []PartitionBatch{{Partition: part, Batch: mustBatch(t, values...)}}}); err != nil {
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
	disk.freeze()
	n.Close()
	if dropped := disk.cut(t); dropped == 0 {
		t.Fatal("the cut dropped nothing: the appends after the snapshot were synced, so the test proves nothing")
	}

	n = open(log.OSFS{})
	defer n.Close()
	for part := range int32(2) {
		if got := readAll(t, n.FSM(), "p", part); fmt.Sprint(got) != fmt.Sprint(want[part]) {
			t.Fatalf("partition %d after the power cut:\n got %v\nwant %v", part, got, want[part])
		}
	}
}
