package replication

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
)

// pacedLogStore is a follower's Raft log whose writes wait until the
// node has applied every entry it holds (at most a few seconds), and
// then a few housekeeping ticks more: catching up with a long log, the
// node then sits between AppendEntries batches with everything it holds
// applied, where a readiness check that trusts its own commit index
// would pass.
type pacedLogStore struct {
	raft.LogStore
	node *atomic.Pointer[Node]
}

func (s pacedLogStore) StoreLogs(logs []*raft.Log) error {
	if n := s.node.Load(); n != nil {
		last, _ := s.LogStore.LastIndex()
		for deadline := time.Now().Add(5 * time.Second); !n.appliedThrough(last) && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(60 * time.Millisecond) // housekeeping ticks every 20 ms
	}
	return s.LogStore.StoreLogs(logs)
}

func (s pacedLogStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// TestFreshNodeWaitsForLeaderCommit: a node added with fresh data to a
// cluster whose leader still holds its whole Raft log replays it from
// index 1 in batches of MaxAppendEntries, all of the leader's term. Its
// own commit index is the leader's cut to the last entry it holds, so
// after each batch it has applied "its" commit index, of the current term;
// had it become ready then, it would serve follower reads far behind what
// the cluster had committed (and served) before it started
// (docs/faults.md, follower reads). It must stay unready until it has
// applied the leader's commit index as of its join.
func TestFreshNodeWaitsForLeaderCommit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newMemCluster(t, ctx, 1)
	leader := c.nodes[0]
	if _, err := NewBackend(leader).createTopic(ctx, fsm.CreateTopic{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	// Enough entries for five AppendEntries batches, from a few writers.
	const writers, perWriter = 8, 5 * 1024 / 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perWriter {
				if _, err := NewBackend(leader).appendCommand(ctx, fsm.Append{Topic: "t", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, "v")}}}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if first, err := leader.stores.logs.FirstIndex(); err != nil || first > 1 {
		t.Fatalf("the leader's log starts at %d (%v): want its whole log", first, err)
	}

	// n2 starts with nothing and a paced Raft log.
	var paced atomic.Pointer[Node]
	fresh, err := Open(Config{NodeID: "n2", RaftBind: "n2", DataDir: t.TempDir(), InMemory: true, APIAdvertise: "n2-api",
		Logger: fsmtest.Logger(), RaftLogLevel: "off",
		HeartbeatTimeout: 50 * time.Millisecond, ElectionTimeout: 50 * time.Millisecond, LeaderLeaseTimeout: 50 * time.Millisecond,
		WrapRaftStores: func(l raft.LogStore, s raft.StableStore) (raft.LogStore, raft.StableStore) {
			return pacedLogStore{LogStore: l, node: &paced}, s
		}})
	if err != nil {
		t.Fatal(err)
	}
	paced.Store(fresh)
	t.Cleanup(func() {
		if err := fresh.Close(); err != nil {
			t.Error(err)
		}
	})
	c.nodes = append(c.nodes, fresh)
	c.link(0, 1, true)
	c.link(1, 0, true)

	target := leader.raft.CommitIndex()
	endAtJoin := partitionEnd(leader, "t")
	if err := leader.raft.AddNonvoter("n2", "n2", 0, 0).Error(); err != nil {
		t.Fatal(err)
	}
	c.waitFor(ctx, "n2 applies the leader's commit index", func() bool {
		// Ready first: once it is, the applied index read after can only
		// be higher.
		ready := fresh.Ready()
		applied := fresh.Status().AppliedIndex
		if ready && applied < target {
			t.Fatalf("n2 is ready at applied index %d (partition end %d), below the leader's commit index %d at its join (end %d)",
				applied, partitionEnd(fresh, "t"), target, endAtJoin)
		}
		return applied >= target
	})
	c.waitFor(ctx, "n2 ready", fresh.Ready)
	if e := partitionEnd(fresh, "t"); e < endAtJoin {
		t.Fatalf("n2 ready with end %d, below the %d the leader had at its join", e, endAtJoin)
	}
}

// partitionEnd is partition 0's end offset on n; 0 if n lacks the topic.
func partitionEnd(n *Node, topic string) int64 {
	p, err := n.FSM().Partition(topic, 0)
	if err != nil {
		return 0
	}
	return p.Log().EndOffset()
}
