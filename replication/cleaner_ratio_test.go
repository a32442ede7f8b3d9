package replication

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
)

// TestCleanerDirtyRatio: after a first compaction, a little new data does
// not make the cleaner rewrite the compacted history (min.cleanable.dirty.ratio
// 0.5, the default); lowering the ratio does. A ratio outside [0, 1] is
// refused.
func TestCleanerDirtyRatio(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	clock := time.UnixMilli(1_700_000_000_000)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	n, err := Open(Config{NodeID: "n1", DataDir: t.TempDir(), RaftBind: "127.0.0.1:0", Bootstrap: true, Logger: fsmtest.Logger(),
		RaftLogLevel: "error", Fatal: func(err error) { t.Errorf("fatal: %v", err) }, Now: now, CleanerInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for !n.IsLeader() {
		select {
		case <-ctx.Done():
			t.Fatal("no leader")
		case <-time.After(10 * time.Millisecond):
		}
	}
	// segment.bytes 100: every batch rolls a segment.
	if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "c", Partitions: 1, Config: map[string]string{
		fsm.ConfigSegmentBytes: "100", fsm.ConfigCleanupPolicy: "compact"}}); err != nil {
		t.Fatal(err)
	}
	appendKV := func(i int) {
		t.Helper()
		if _, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "c", Batches: []fsm.PartitionBatch{{Partition: 0,
			Batch: keyedBatch(t, now().UnixMilli(), fmt.Sprint("k", i%2), fmt.Sprint("value-", i))}}}); err != nil {
			t.Fatal(err)
		}
	}
	clean := func(wantPrepared int64) {
		t.Helper()
		if err := n.Clean(ctx); err != nil {
			t.Fatal(err)
		}
		if got := n.CleanerStats().Prepared; got != wantPrepared {
			t.Fatalf("%d compactions prepared, want %d", got, wantPrepared)
		}
	}
	for i := range 8 {
		appendKV(i)
	}
	clean(1) // nothing compacted yet: every closed byte is dirty
	clean(1) // all clean
	appendKV(8)
	clean(1) // one small dirty segment beside the compacted ones
	if _, err := NewBackend(n).alterTopic(ctx, fsm.AlterTopic{Name: "c", Config: map[string]string{fsm.ConfigMinCleanableDirtyRatio: "0.01"}}); err != nil {
		t.Fatal(err)
	}
	clean(2)
	if _, err := NewBackend(n).alterTopic(ctx, fsm.AlterTopic{Name: "c", Config: map[string]string{fsm.ConfigMinCleanableDirtyRatio: "1.5"}}); !errors.Is(err, backend.ErrInvalidConfig) {
		t.Fatalf("ratio 1.5: %v, want backend.ErrInvalidConfig", err)
	}
}
