package replication

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
)

// TestInMemoryNode: with InMemory a node needs no Raft address, writes no
// Raft files, takes the configured Raft timeouts, and serves appends; a
// node without them takes logd's defaults (raft_stores.go).
func TestInMemoryNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	cfg := Config{NodeID: "n1", DataDir: dir, InMemory: true, Bootstrap: true, Logger: fsmtest.Logger(), RaftLogLevel: "error",
		HeartbeatTimeout: 30 * time.Millisecond, ElectionTimeout: 40 * time.Millisecond, LeaderLeaseTimeout: 20 * time.Millisecond}
	if err := (Config{NodeID: "n1", DataDir: dir}).Validate(); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Fatalf("a TCP node without a Raft address: %v", err)
	}
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	if rc := n.raft.ReloadableConfig(); rc.HeartbeatTimeout != cfg.HeartbeatTimeout || rc.ElectionTimeout != cfg.ElectionTimeout {
		t.Fatalf("raft timeouts %v, %v; want the configured ones", rc.HeartbeatTimeout, rc.ElectionTimeout)
	}
	for !n.IsLeader() || !n.Ready() {
		select {
		case <-ctx.Done():
			t.Fatal("no leader")
		case <-time.After(2 * time.Millisecond):
		}
	}
	if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	offs, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "t", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, "a", "b")}}})
	if err != nil || len(offs) != 1 || offs[0] != 0 {
		t.Fatalf("append: %v, %v", offs, err)
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "raft")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("raft dir of an in-memory node: %v", err)
	}

	d := openSingleNode(t, ctx, Config{DataDir: t.TempDir()})
	defer d.Close()
	if rc := d.raft.ReloadableConfig(); rc.HeartbeatTimeout != DefaultHeartbeatTimeout || rc.ElectionTimeout != DefaultHeartbeatTimeout {
		t.Fatalf("default raft timeouts %v, %v; want logd's %v, %v", rc.HeartbeatTimeout, rc.ElectionTimeout, DefaultHeartbeatTimeout, DefaultHeartbeatTimeout)
	}
}
