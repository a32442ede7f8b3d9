package replication

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
)

// TestReadIndexAndAwaitApplied: the leader's read index covers a write it
// acknowledged; a follower cut off from the leader waits for that index
// and, past the wait, fails with a BehindError naming the leader, then
// answers at once once it has applied it; a follower has no read index of
// its own.
func TestReadIndexAndAwaitApplied(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newMemCluster(t, ctx, 3)
	leader, follower := NewBackend(c.nodes[0]), NewBackend(c.nodes[2])
	if _, err := leader.createTopic(ctx, fsm.CreateTopic{Name: "orders", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	c.waitFor(ctx, "follower knows the leader's API address", func() bool { a, _ := follower.LeaderAPIAddress(); return a == "n1-api" })

	c.isolate(2, true)
	if _, err := leader.appendCommand(ctx, fsm.Append{Topic: "orders", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, "a")}}}); err != nil {
		t.Fatal(err)
	}
	acked := leader.AppliedIndex()
	idx, err := leader.ReadIndex()
	if err != nil || idx < acked {
		t.Fatalf("leader's read index %d, %v; want at least %d, the acknowledged write's", idx, err, acked)
	}
	if _, err := follower.ReadIndex(); !errors.Is(err, backend.ErrNotLeader) {
		t.Fatalf("follower's read index: %v, want ErrNotLeader", err)
	}
	var be *backend.BehindError
	if err := follower.AwaitApplied(ctx, idx, 50*time.Millisecond); !errors.As(err, &be) || be.LeaderAddress != "n1-api" {
		t.Fatalf("cut-off follower: %v, want a BehindError naming n1-api", err)
	}
	c.isolate(2, false)
	if err := follower.AwaitApplied(ctx, idx, time.Minute); err != nil {
		t.Fatalf("healed follower: %v", err)
	}
	if got := follower.AppliedIndex(); got < idx {
		t.Fatalf("follower applied %d after the wait, want at least %d", got, idx)
	}
}
