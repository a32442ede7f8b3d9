package replication

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/queue"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
)

// TestNodeRestart runs a real single-node Raft group: create, produce,
// snapshot, produce more, restart several times; every record stays at its
// offset exactly once.
func TestNodeRestart(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var want []string
	for run := 0; run < 4; run++ {
		n := openTestNode(t, ctx, dir)
		if run == 0 {
			if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "r", Partitions: 1}); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 5; i++ {
			v := fmt.Sprintf("run%d-%d", run, i)
			bases, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "r", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, v)}}})
			if err != nil {
				t.Fatal(err)
			}
			if bases[0] != int64(len(want)) {
				t.Fatalf("run %d: base offset %d, want %d", run, bases[0], len(want))
			}
			want = append(want, v)
			if run%2 == 1 && i == 2 {
				if err := n.Snapshot(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if got := fsmtest.ReadAll(t, n.FSM(), "r", 0); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("run %d:\n got %v\nwant %v", run, got, want)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func openTestNode(t *testing.T, ctx context.Context, dir string) *Node {
	t.Helper()
	return openSingleNode(t, ctx, Config{DataDir: dir, Fatal: func(err error) { t.Errorf("fatal: %v", err) }})
}

// TestDeleteTopicAfterSnapshot: a topic in the latest snapshot, deleted
// after it, must not stop the node from restarting (its files are gone, and
// the Raft log replays the deletion after the restore).
func TestDeleteTopicAfterSnapshot(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := openTestNode(t, ctx, dir)
	if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "gone", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "kept", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"gone", "kept"} {
		if _, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: topic, Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, "x", "y")}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if err := NewBackend(n).deleteTopic(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = openTestNode(t, ctx, dir)
	defer n.Close()
	if _, err := n.FSM().Topic("gone"); err == nil {
		t.Fatal("deleted topic is back after restart")
	}
	if got := fsmtest.ReadAll(t, n.FSM(), "kept", 0); fmt.Sprint(got) != "[x y]" {
		t.Fatalf("kept = %v", got)
	}
}

// TestProposeSameBufferTwice: propose seals in place what it is given; a
// caller proposing the same buffer again proposes the same command, not an
// entry sealed twice (which would decode with trailing bytes and stop
// every replica).
func TestProposeSameBufferTwice(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := openTestNode(t, ctx, t.TempDir())
	defer n.Close()
	data := fsmtest.Command(t, fsm.CmdCreateTopic, time.Now().UnixNano(), fsm.CreateTopic{Name: "once", Partitions: 1})
	if _, err := n.propose(ctx, data); err != nil {
		t.Fatal(err)
	}
	if _, err := n.propose(ctx, data); !errors.Is(err, backend.ErrTopicExists) {
		t.Fatalf("second propose of the same buffer: %v, want backend.ErrTopicExists", err)
	}
	if err := n.FSM().Failed(); err != nil {
		t.Fatal(err)
	}
}

// TestGroupNodeRestart commits through a real node, snapshots, commits
// more, and restarts: committed offsets and members survive (members can
// carry on with their generation after a leader change).
func TestGroupNodeRestart(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tp := group.TopicPartition{Topic: "orders", Partition: 0}
	var gen int64
	for run := 0; run < 3; run++ {
		n := openTestNode(t, ctx, dir)
		// Wait until the log before this start is applied.
		if err := n.Raft().Barrier(10 * time.Second).Error(); err != nil {
			t.Fatal(err)
		}
		if run == 0 {
			if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "orders", Partitions: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "orders", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, "1", "2", "3", "4")}}}); err != nil {
				t.Fatal(err)
			}
			a, err := NewBackend(n).joinGroup(ctx, fsm.GroupJoin{Group: "g", Member: "m", Topics: []string{"orders"}, SessionTimeoutMs: 60_000})
			if err != nil {
				t.Fatal(err)
			}
			gen = a.Generation
		}
		if run > 0 {
			g, err := n.FSM().ConsumerGroup("g")
			if err != nil {
				t.Fatal(err)
			}
			if c := g.Topics["orders"].Partitions[0].Committed; c != int64(run) {
				t.Fatalf("run %d: committed %d after restart, want %d", run, c, run)
			}
		}
		if err := NewBackend(n).commitGroupOffsets(ctx, fsm.GroupCommit{Group: "g", Member: "m", Generation: gen, Offsets: []group.OffsetCommit{{TopicPartition: tp, Offset: int64(run + 1)}}}); err != nil {
			t.Fatal(err)
		}
		// Refused before reaching Raft: the state is unchanged.
		before := n.FSM().AppliedIndex()
		err := NewBackend(n).commitGroupOffsets(ctx, fsm.GroupCommit{Group: "g", Member: "m", Generation: gen - 1, Offsets: []group.OffsetCommit{{TopicPartition: tp, Offset: 4}}})
		if !errors.Is(err, group.ErrStaleGeneration) {
			t.Fatalf("stale commit: %v", err)
		}
		if n.FSM().AppliedIndex() != before {
			t.Fatal("a refused commit reached the Raft log")
		}
		if run == 1 {
			if err := n.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func BenchmarkGroupOffsetCommit(b *testing.B) {
	dir := b.TempDir()
	n, err := Open(Config{NodeID: "n1", DataDir: dir, RaftBind: "127.0.0.1:0", Bootstrap: true, Logger: fsmtest.Logger(), RaftLogLevel: "error"})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	ctx := context.Background()
	for !n.IsLeader() {
		time.Sleep(time.Millisecond) // no event to wait on for leadership here
	}
	if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "b", Partitions: 1}); err != nil {
		b.Fatal(err)
	}
	if _, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "b", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatchB(b, "x")}}}); err != nil {
		b.Fatal(err)
	}
	a, err := NewBackend(n).joinGroup(ctx, fsm.GroupJoin{Group: "g", Member: "m", Topics: []string{"b"}, SessionTimeoutMs: 600_000})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := NewBackend(n).commitGroupOffsets(ctx, fsm.GroupCommit{Group: "g", Member: "m", Generation: a.Generation, Offsets: []group.OffsetCommit{{TopicPartition: group.TopicPartition{Topic: "b"}, Offset: 1}}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}

// TestQueueNodeRestart runs a group on a real node, restarts it (with and
// without a snapshot) and checks the lease state and delivery counts.
func TestQueueNodeRestart(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := openTestNode(t, ctx, dir)
	if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "jobs", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "jobs", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: jobBatch(t, "a", "b")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewBackend(n).createQueueGroup(ctx, fsm.QueueCreate{Topic: "jobs", Group: "w"}); err != nil {
		t.Fatal(err)
	}
	c, err := NewBackend(n).queueClaim(ctx, fsm.QueueClaim{Topic: "jobs", Group: "w", Max: 1, Lease: time.Hour})
	if err != nil || len(c.Records) != 1 {
		t.Fatalf("claim: %+v %v", c, err)
	}
	tok := c.Records[0].Token
	for run := 0; run < 2; run++ {
		if run == 1 {
			if err := n.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		n = openTestNode(t, ctx, dir)
		// Leadership comes before the replay of the Raft log ends.
		for !n.Ready() {
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
		info, err := n.FSM().DescribeQueueGroup("jobs", "w", time.Now().UnixNano())
		if err != nil {
			t.Fatal(err)
		}
		if p := info.Partitions[0]; p.InFlight != 1 || p.Ready != 1 {
			t.Fatalf("run %d: describe after restart: %+v", run, p)
		}
	}
	rs, err := NewBackend(n).queueExtend(ctx, fsm.QueueExtend{Topic: "jobs", Group: "w", Tokens: []queue.Token{tok}, Lease: time.Hour})
	if err != nil || rs.Results[0].Outcome != queue.TokenOK {
		t.Fatalf("extend after restart: %+v %v", rs, err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotDueGrowsWithWindows(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		since, snapshotBytes, windows int64
		want                          bool
	}{
		{127 * mib, 128 * mib, 0, false},
		{128 * mib, 128 * mib, 0, true},
		{128 * mib, 128 * mib, 5 * mib, true},    // small windows: SnapshotBytes rules
		{128 * mib, 128 * mib, 100 * mib, false}, // 2M keys: wait for 4x their size
		{399 * mib, 128 * mib, 100 * mib, false},
		{400 * mib, 128 * mib, 100 * mib, true},
		{1 * mib, 1 * mib, 0, true},
	} {
		if got := snapshotDue(tc.since, tc.snapshotBytes, tc.windows); got != tc.want {
			t.Errorf("snapshotDue(%d, %d, %d) = %v, want %v", tc.since, tc.snapshotBytes, tc.windows, got, tc.want)
		}
	}
}

// TestLeaderServesAfterBarrierOfItsTerm: a leader is ready only once it has
// applied a barrier in its current term, so after an election it never
// answers from a state that lacks entries its predecessor acknowledged.
// Forgetting the term's barrier (as a new term would) makes the node
// unready until housekeeping has run the barrier again.
func TestLeaderServesAfterBarrierOfItsTerm(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := openSingleNode(t, ctx, Config{DataDir: t.TempDir()})
	defer n.Close()
	term := n.raft.CurrentTerm()
	if got := n.leaderTerm.Load(); got != term {
		t.Fatalf("ready leader: barrier term %d, current term %d", got, term)
	}
	// The state a fresh term starts with: no barrier applied in it yet.
	n.leaderTerm.Store(term - 1)
	if n.Ready() {
		t.Fatal("a leader without a barrier in its term is ready")
	}
	for !n.Ready() {
		select {
		case <-ctx.Done():
			t.Fatal("the leader never ran the barrier of its term")
		case <-time.After(5 * time.Millisecond):
		}
	}
	if got := n.leaderTerm.Load(); got != term {
		t.Fatalf("barrier term %d, want %d", got, term)
	}
}
