package replication

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
)

// heldLog is a data group replica's Raft log whose writes after the first
// wait until free: a replica catching up with its group in AppendEntries
// batches then sits after the first one, having applied every entry it
// holds, with its own commit index (the leader's, cut to that batch)
// reached.
type heldLog struct {
	raft.LogStore
	wrote   atomic.Bool
	waiting chan struct{} // closed once a write waits
	once    sync.Once
	release chan struct{}
	freed   sync.Once
}

func newHeldLog() *heldLog {
	return &heldLog{waiting: make(chan struct{}), release: make(chan struct{})}
}

func (l *heldLog) StoreLogs(logs []*raft.Log) error {
	if l.wrote.Swap(true) {
		l.once.Do(func() { close(l.waiting) })
		<-l.release
	}
	return l.LogStore.StoreLogs(logs)
}

func (l *heldLog) StoreLog(e *raft.Log) error { return l.StoreLogs([]*raft.Log{e}) }

// free lets every write through.
func (l *heldLog) free() { l.freed.Do(func() { close(l.release) }) }

// TestRestartedGroupReplicaWaitsForLeaderCommit: a data group replica
// that restarts behind its group catches up in AppendEntries batches of
// MaxAppendEntries, and after each batch its own commit index is the
// leader's cut to the entries it holds, which it has applied. Had it
// served reads then (dataGroup.serves), it would answer, to its own node
// and to any node that asks it over the Raft port, ends far below what
// the group had committed, and served, before it opened: the nemesis
// run of seed 1796626726345076957 saw a read through a node that had
// just restarted (its read floors gone with the process) answered by
// another node's replica that had just restarted too, at end 112 where
// it had answered 115 before (TestNemesisDataGroups, docs/faults.md). It
// must serve only once it applied the commit index its leader sent it
// after it opened, as a node's meta group does (Node.caughtUp).
func TestRestartedGroupReplicaWaitsForLeaderCommit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, nodes, describe := dataGroupCluster(ctx, t, func(cfg *Config) {
		cfg.DataGroupsPerNode, cfg.ReplicationFactor = 1, 3
		// No snapshot: n3 catches up from the leader's log, in batches.
		cfg.SnapshotInterval, cfg.SnapshotThreshold = time.Hour, 1<<40
	})
	n3 := nodes[2]
	waitFor(ctx, t, "three groups of three voters with leaders", func() bool {
		voters, leaders := dataGroupsView(nodes)
		if len(voters) != 3 || len(leaders) != 3 {
			return false
		}
		for _, v := range voters {
			if len(v) != 3 {
				return false
			}
		}
		return true
	}, describe)
	b := NewBackend(nodes[0])
	if _, err := b.CreateTopic(ctx, backend.CreateTopic{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := b.Produce(ctx, backend.ProduceRequest{Topic: "t", Records: []backend.ProduceRecord{{Partition: 0, HasPartition: true, Value: []byte("before")}}}); err != nil {
			t.Fatal(err)
		}
	}
	waitOwnReplica(ctx, t, n3, "t", 0, 3, describe)
	mt, err := nodes[0].FSM().Topic("t")
	if err != nil {
		t.Fatal(err)
	}
	g := mt.Placement[0]

	// n3 stops; the group's leader appends more than two batches of
	// entries without it.
	cfg := c.stop(n3)
	// n3 may have led the group (its preferred leader gets the
	// leadership back): n1 or n2 leads it once they elected one.
	var leader *dataGroup
	findLeader := func() {
		waitFor(ctx, t, fmt.Sprintf("n1 or n2 leads group %d", g), func() bool {
			for _, n := range nodes[:2] {
				if dg := n.dataGroup(g); dg != nil && dg.leadsReady() {
					leader = dg
					return true
				}
			}
			return false
		}, describe)
	}
	const appends = 2500 // MaxAppendEntries is 1024
	// An append refused because the leader is handing its leadership to
	// the group's preferred replica (raft.ErrLeadershipTransferInProgress)
	// was never appended: it is sent again to the next leader.
	todo := appends
	for round := 0; todo > 0; round++ {
		if round == 5 {
			t.Fatalf("%d appends still refused by leadership transfers after %d rounds", todo, round)
		}
		findLeader()
		futures := make([]raft.ApplyFuture, todo)
		for i := range futures {
			a := fsm.Append{Topic: "t", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, "after")}}}
			futures[i] = leader.raft.Apply(fsm.Seal(fsm.EncodeAppend(time.Now().UnixNano(), a)), time.Minute)
		}
		todo = 0
		for _, f := range futures {
			if err := f.Error(); errors.Is(err, raft.ErrLeadershipTransferInProgress) {
				todo++
				continue
			} else if err != nil {
				t.Fatalf("append while n3 is away: %v", err)
			}
			if err, ok := f.Response().(error); ok && err != nil {
				t.Fatalf("append while n3 is away: %v", err)
			}
		}
	}
	part, err := leader.fsm.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	committed := part.Log().EndOffset()
	if committed != 3+appends {
		t.Fatalf("the leader's end %d, want %d", committed, 3+appends)
	}

	// n3 opens again; its replica of the group holds back every log write
	// after its first.
	held := newHeldLog()
	defer held.free()
	cfg.wrapGroupLog = func(id uint64, logs raft.LogStore) raft.LogStore {
		if id != g {
			return logs
		}
		held.LogStore = logs
		return held
	}
	n3 = c.start(cfg)
	nodes[2] = n3
	var dg *dataGroup
	waitFor(ctx, t, "n3's replica applies a first batch and holds the next back", func() bool {
		select {
		case <-held.waiting:
		default:
			return false
		}
		dg = n3.dataGroup(g)
		return dg != nil && dg.raft.CommitIndex() > 0 && dg.raft.AppliedIndex() >= dg.raft.CommitIndex()
	}, describe)
	// What it answers now, for a while (Raft's applied index runs ahead of
	// the state machine's, and the runner notes a catch-up every tick).
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		end := int64(-1)
		if p, err := dg.fsm.Partition("t", 0); err == nil {
			end = p.Log().EndOffset()
		}
		if end >= committed {
			t.Fatalf("n3's replica holds end %d with its log held back; want below %d (the test holds nothing back)", end, committed)
		}
		if dg.serves() {
			t.Fatalf("n3's replica of group %d serves at end %d (commit index %d, the leader's cut to the batch it holds), below the %d the group committed before it opened", g, end, dg.raft.CommitIndex(), committed)
		}
		// Another node asking it over the Raft port is sent on, not
		// answered from it.
		ans, err := nodes[0].callGroup(ctx, "n3", g, groupCall{Kind: callRead, Read: &readCall{Topic: "t", Partition: 0, MaxBytes: 1 << 20}})
		switch {
		case err != nil:
			t.Fatalf("call n3: %v", err)
		case ans.Err == nil && ans.Read != nil:
			t.Fatalf("n3 answered a read of group %d over the Raft port at end %d, below the %d the group committed before it opened", g, ans.Read.End, committed)
		case ans.Err == nil || !errors.Is(ans.Err.decode(), backend.ErrNotLeader):
			t.Fatalf("n3's answer to a read: %+v; want it sent on to another replica", ans)
		}
		// A read through n3 is answered by another replica.
		if r, err := NewBackend(n3).Read("t", 0, 0, 1); err == nil && r.EndOffset < committed {
			t.Fatalf("a read through n3 answered end %d, below the %d the group committed before it opened", r.EndOffset, committed)
		}
	}

	// Let go, n3's replica catches up and serves.
	held.free()
	waitFor(ctx, t, "n3's replica catches up and serves", func() bool {
		p, err := dg.fsm.Partition("t", 0)
		return err == nil && p.Log().EndOffset() == committed && dg.serves()
	}, describe)
	if r, err := NewBackend(n3).Read("t", 0, 0, 1); err != nil || r.EndOffset != committed {
		t.Fatalf("a read through n3: %+v, %v; want end %d", r, err, committed)
	}
}
