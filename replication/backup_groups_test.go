package replication

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
)

// TestBackupRefusedOverDataGroups: a backup holds the meta group's state
// only, so once a topic is placed over data groups the leader refuses it
// (FAILED_PRECONDITION through the API) instead of writing a file without
// those partitions' records; no byte is written.
func TestBackupRefusedOverDataGroups(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, nodes, describe := dataGroupCluster(ctx, t, func(cfg *Config) { cfg.DataGroupsPerNode, cfg.ReplicationFactor = 1, 2 })
	l := nodes[0]
	waitGroupsOfTwo(ctx, t, nodes, describe)
	started := false
	start := func(backend.BackupInfo) (io.Writer, error) { started = true; return io.Discard, nil }
	if _, err := l.Backup(ctx, start); err != nil {
		t.Fatalf("a backup before any placed topic: %v", err)
	}
	if _, err := NewBackend(l).CreateTopic(ctx, backend.CreateTopic{Name: "placed", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	started = false
	if _, err := l.Backup(ctx, start); !errors.Is(err, backend.ErrBackupDataGroups) {
		t.Fatalf("a backup with a placed topic: %v, want ErrBackupDataGroups", err)
	}
	if started {
		t.Error("the refused backup started writing")
	}
}
