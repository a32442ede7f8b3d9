package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/internal/backupfile"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/replication/catchup"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
	"github.com/logd-dev/logd/replication/internal/recordtest"
	"github.com/logd-dev/logd/replication/raftstore"
)

// freeAddr returns a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestBackupRestore: a backup of a node with several segments per
// partition restores into a new data dir whose node, started as the only
// member of a new cluster, holds every record at the same offsets, and
// takes new writes after them. A truncated or damaged file is refused with
// the format's typed errors and leaves the target as it was.
func TestBackupRestore(t *testing.T) {
	// A backup taken from a node of either Raft log store restores into
	// a node of the other (restore writes no Raft log, so the restored
	// data dir takes the store it is asked for: raftstore/logstore.go).
	for _, stores := range [][2]string{{raftstore.LogStoreBoltDB, raftstore.LogStoreWAL}, {raftstore.LogStoreWAL, raftstore.LogStoreBoltDB}} {
		t.Run(stores[0]+" to "+stores[1], func(t *testing.T) { testBackupRestore(t, stores[0], stores[1]) })
	}
}

func testBackupRestore(t *testing.T, from, to string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := openSingleNode(t, ctx, Config{DataDir: t.TempDir(), Log: log.Options{SegmentBytes: 300}, RaftLogStore: from})
	defer n.Close()
	if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "t", Partitions: 2, Config: map[string]string{"segment.bytes": "300"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "empty", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	// An idempotent producer's batch: its partition's producer state goes
	// into the backup.
	if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "idem", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	pid, _, err := NewBackend(n).InitProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "idem", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: recordtest.ProducerBatch(t, pid, 0, 0, "p0")}}}); err != nil {
		t.Fatal(err)
	}
	// A SCRAM credential: the security state goes into the backup.
	cred, err := auth.SCRAMCredentialFromSalted(auth.SCRAMSHA512, "alice", "pw", []byte("salt"), auth.MinSCRAMIterations)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewBackend(n).SetSCRAMCredential(ctx, cred, "User:admin"); err != nil {
		t.Fatal(err)
	}
	var want [2][]string
	for i := range 20 {
		p := int32(i % 2)
		v := fmt.Sprintf("v%02d", i)
		if _, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "t", Batches: []fsm.PartitionBatch{{Partition: p, Batch: mustBatch(t, v)}}}); err != nil {
			t.Fatal(err)
		}
		want[p] = append(want[p], v)
	}
	var file bytes.Buffer
	info, err := n.Backup(ctx, func(backend.BackupInfo) (io.Writer, error) { return &file, nil })
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != int64(file.Len()) || info.Header.Segments < 6 || info.Header.Index == 0 {
		t.Fatalf("backup of %d bytes: %+v", file.Len(), info)
	}
	// Writes after the backup are not in it.
	if _, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "t", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, "after")}}}); err != nil {
		t.Fatal(err)
	}
	// Nor is a producer id handed out after it, which the restored
	// cluster must never hand out again.
	after, _, err := NewBackend(n).InitProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}

	target := filepath.Join(t.TempDir(), "restored")
	raftAddr := freeAddr(t)
	restoredAt := time.Now()
	rcfg := catchup.RestoreConfig{DataDir: target, NodeID: "r1", RaftAddress: raftAddr, Logger: fsmtest.Logger(),
		Now: func() time.Time { return restoredAt }}
	b := file.Bytes()
	for _, tc := range []struct {
		name string
		file []byte
		want func(error) bool
	}{
		{"truncated", b[:len(b)-10], func(err error) bool { return errors.Is(err, backupfile.ErrTruncated) }},
		{"cut in a segment", b[:len(b)/2], func(err error) bool { return errors.Is(err, backupfile.ErrTruncated) }},
		{"flipped in a segment", flip(b, len(b)-200), func(err error) bool {
			var ce *backupfile.CorruptError
			var le *log.CorruptionError
			return errors.As(err, &ce) || errors.As(err, &le)
		}},
	} {
		_, err := catchup.RestoreBackup(bytes.NewReader(tc.file), rcfg)
		if !tc.want(err) {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if _, serr := os.Stat(target); !errors.Is(serr, os.ErrNotExist) {
			t.Fatalf("%s: the target exists after a refused restore: %v", tc.name, serr)
		}
		if _, serr := os.Stat(target + ".restoring"); !errors.Is(serr, os.ErrNotExist) {
			t.Fatalf("%s: the partial dir is left: %v", tc.name, serr)
		}
	}

	h, err := catchup.RestoreBackup(bytes.NewReader(b), rcfg)
	if err != nil {
		t.Fatal(err)
	}
	if h.Index != info.Header.Index {
		t.Fatalf("restored index %d, backup %d", h.Index, info.Header.Index)
	}
	if _, err := catchup.RestoreBackup(bytes.NewReader(b), rcfg); !errors.Is(err, catchup.ErrRestoreTarget) {
		t.Fatalf("a restore over a restored dir: %v", err)
	}
	r, err := Open(Config{NodeID: "r1", DataDir: target, RaftBind: raftAddr, Logger: fsmtest.Logger(), RaftLogLevel: "error", APIAdvertise: "127.0.0.1:1",
		RaftLogStore: to})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for !r.IsLeader() || !r.Ready() {
		select {
		case <-ctx.Done():
			t.Fatal("the restored node does not lead")
		case <-time.After(10 * time.Millisecond):
		}
	}
	for p := range int32(2) {
		if got := fsmtest.ReadAll(t, r.FSM(), "t", p); !slices.Equal(got, want[p]) {
			t.Fatalf("partition %d restored %v, want %v", p, got, want[p])
		}
	}
	if got := fsmtest.ReadAll(t, r.FSM(), "empty", 0); len(got) != 0 {
		t.Fatalf("empty topic restored with %v", got)
	}
	offs, err := NewBackend(r).appendCommand(ctx, fsm.Append{Topic: "t", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, "new")}}})
	if err != nil || offs[0] != int64(len(want[0])) {
		t.Fatalf("append after restore: %v, %v", offs, err)
	}
	// The producer state came with the backup: a retry of the producer's
	// batch is answered with its offset, not written again; and the new
	// cluster's ids start above any the old one handed out.
	if offs, err := NewBackend(r).appendCommand(ctx, fsm.Append{Topic: "idem", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: recordtest.ProducerBatch(t, pid, 0, 0, "p0")}}}); err != nil || offs[0] != 0 {
		t.Fatalf("the producer's retry after restore: %v, %v", offs, err)
	}
	if got := fsmtest.ReadAll(t, r.FSM(), "idem", 0); !slices.Equal(got, []string{"p0"}) {
		t.Fatalf("idem restored and retried: %v", got)
	}
	if id, _, err := NewBackend(r).InitProducerID(ctx); err != nil || id <= after || id < fsm.ProducerIDRestoreBase(restoredAt) {
		t.Fatalf("producer id after restore: %d (%v); the old cluster handed out %d, the restore's base is %d", id, err, after, fsm.ProducerIDRestoreBase(restoredAt))
	}
	if c, ok := NewBackend(r).SCRAMCredential("alice", auth.SCRAMSHA512); !ok || !c.CheckPassword("pw") {
		t.Fatalf("alice's SCRAM credential after restore: %+v, %v", c, ok)
	}
	// The registry names only the new cluster's node.
	for _, nd := range r.FSM().Nodes() {
		if nd.ID != "r1" {
			t.Fatalf("registry names %s of the old cluster", nd.ID)
		}
	}
}

func flip(b []byte, i int) []byte {
	d := bytes.Clone(b)
	d[i] ^= 0x01
	return d
}
