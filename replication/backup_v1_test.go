package replication

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/logd-dev/logd/replication/catchup"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
)

// TestRestoreBackupVersion1: a backup file of format version 1, written by
// the build before backups covered data groups (testdata/backup-v1.logd,
// from backupWorkload on one node, with what it left in
// testdata/backup-v1.json), still restores, with every record, the
// consumer group's offsets, the queue group's state, the dead letters and
// the idempotency window.
func TestRestoreBackupVersion1(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	file, err := os.ReadFile(filepath.Join("testdata", "backup-v1.logd"))
	if err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(filepath.Join("testdata", "backup-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want backupWant
	if err := json.Unmarshal(js, &want); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "restored")
	raftAddr := freeAddr(t)
	h, err := catchup.RestoreBackup(bytes.NewReader(file), catchup.RestoreConfig{DataDir: target, NodeID: "r1", RaftAddress: raftAddr, Logger: fsmtest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if h.FormatVersion != 1 {
		t.Fatalf("the fixture's format version %d, want 1", h.FormatVersion)
	}
	r := openRestored(ctx, t, target, raftAddr)
	checkRestored(ctx, t, r, want, false)
}

// openRestored starts the node restored into dir as r1 and waits until it
// leads and serves.
func openRestored(ctx context.Context, t *testing.T, dir, raftAddr string) *Node {
	t.Helper()
	r, err := Open(Config{NodeID: "r1", DataDir: dir, RaftBind: raftAddr, Logger: fsmtest.Logger(), RaftLogLevel: "error", APIAdvertise: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("close the restored node: %v", err)
		}
	})
	for !r.IsLeader() || !r.Ready() {
		select {
		case <-ctx.Done():
			t.Fatal("the restored node does not lead")
		case <-time.After(10 * time.Millisecond):
		}
	}
	return r
}
