package replication

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
)

// TestCleanerNode runs the leader's cleaner with an injected clock: time
// retention at its exact boundary, then compaction, with fetches below the
// new log start out of range.
func TestCleanerNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	clock := time.UnixMilli(1_700_000_000_000)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	dir := t.TempDir()
	n, err := Open(Config{NodeID: "n1", DataDir: dir, RaftBind: "127.0.0.1:0", Bootstrap: true, Logger: fsmtest.Logger(),
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
	if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "r", Partitions: 1, Config: map[string]string{
		fsm.ConfigRetentionMs: "1000", fsm.ConfigSegmentBytes: "100", fsm.ConfigCleanupPolicy: "compact,delete", fsm.ConfigDeleteRetentionMs: "0"}}); err != nil {
		t.Fatal(err)
	}
	base := now().UnixMilli()
	for i := range 6 {
		// Records 0-2 at base, 3-5 at base+500.
		ts := base + int64(i/3)*500
		if _, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "r", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: keyedBatch(t, ts, fmt.Sprint("k", i%2), fmt.Sprint("v", i))}}}); err != nil {
			t.Fatal(err)
		}
	}
	p, _ := n.FSM().Partition("r", 0)
	// Exactly retention.ms after the first three: nothing expires yet.
	// Compaction runs (compact,delete) but offsets stay.
	advance(1000 * time.Millisecond)
	if err := n.Clean(ctx); err != nil {
		t.Fatal(err)
	}
	if s := p.Log().StartOffset(); s != 0 {
		t.Fatalf("log start %d after exactly retention.ms, want 0", s)
	}
	// Offset 5 is in the active segment, so 3 (k1) is still the newest
	// k1 below the cleaning point.
	if got, want := liveKV(t, n.FSM(), "r"), []string{"3:k1=v3", "4:k0=v4", "5:k1=v5"}; !slices.Equal(got, want) {
		t.Fatalf("after compaction %v, want %v", got, want)
	}
	// One ms later the first three segments expire.
	advance(time.Millisecond)
	if err := n.Clean(ctx); err != nil {
		t.Fatal(err)
	}
	if s := p.Log().StartOffset(); s != 3 {
		t.Fatalf("log start %d, want 3", s)
	}
	var oor *log.OutOfRangeError
	if _, err := p.Log().Read(2, 100); !errors.As(err, &oor) || oor.Start != 3 || oor.End != 6 {
		t.Fatalf("read below the log start: %v", err)
	}
	c := n.FSM().CleanerCounters()
	if c.Trims != 1 || c.Compactions < 1 || c.BytesDeleted <= 0 || c.RecordsCompacted != 3 {
		t.Fatalf("counters %+v", c)
	}
	if st := n.CleanerStats(); st.Prepared < 1 || st.Runs != 2 {
		t.Fatalf("stats %+v", st)
	}
	// The cleaner goroutine closes the files the trim and the compactions
	// unlinked, off the apply path.
	for tick := time.NewTicker(5 * time.Millisecond); openUnlinked(t, dir) > 0; {
		select {
		case <-ctx.Done():
			t.Fatalf("%d unlinked segment files still open", openUnlinked(t, dir))
		case <-tick.C:
		}
	}
	// Alter through the node.
	if _, err := NewBackend(n).alterTopic(ctx, fsm.AlterTopic{Name: "r", Config: map[string]string{fsm.ConfigRetentionMs: "-1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewBackend(n).alterTopic(ctx, fsm.AlterTopic{Name: "r", Config: map[string]string{"bogus": "1"}}); !errors.Is(err, backend.ErrInvalidConfig) {
		t.Fatalf("bad alter: %v", err)
	}
	tp, _ := n.FSM().Topic("r")
	if tp.Config[fsm.ConfigRetentionMs] != "-1" {
		t.Fatalf("config %v", tp.Config)
	}
}

// openUnlinked counts this process's open files under dir that were
// unlinked (Linux; 0 elsewhere).
func openUnlinked(t *testing.T, dir string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	n := 0
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir) && strings.HasSuffix(target, " (deleted)") {
			n++
		}
	}
	return n
}
