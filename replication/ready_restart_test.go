package replication

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
)

// TestRestartedFollowerWaitsForLeaderTerm: a node that led, applied every
// entry of its log and was killed restarts as a follower with partition
// logs that lost what was not synced (here: an empty data directory). The
// new leader's first AppendEntries carries the commit index it learnt in
// the old term, which may be below what the old leader applied and served
// (it learns the rest only once an entry of its own term commits). A
// follower that became ready at that commit index would answer from an
// older state than it answered from before the restart: its end offsets
// would go back (docs/faults.md, the nemesis harness's follower-reads
// check). It must wait until its commit index covers an entry of the
// leader's term.
func TestRestartedFollowerWaitsForLeaderTerm(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The node leads alone and applies a topic and two appends: end 3.
	cfg := Config{NodeID: "b", RaftBind: "b", DataDir: t.TempDir(), InMemory: true, Bootstrap: true, Logger: fsmtest.Logger(), RaftLogLevel: "error",
		HeartbeatTimeout: 30 * time.Millisecond, ElectionTimeout: 40 * time.Millisecond, LeaderLeaseTimeout: 20 * time.Millisecond}
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for !n.IsLeader() || !n.Ready() {
		select {
		case <-ctx.Done():
			n.Close()
			t.Fatal("no leader")
		case <-time.After(2 * time.Millisecond):
		}
	}
	if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	firstAppend, _ := n.stores.logs.LastIndex()
	firstAppend++
	for _, b := range [][]byte{mustBatch(t, "a", "b"), mustBatch(t, "c")} {
		if _, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "t", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: b}}}); err != nil {
			t.Fatal(err)
		}
	}
	old := n.stores.logs
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	// Its Raft log, with a three-voter configuration, survives.
	logs := raft.NewInmemStore()
	var lastTerm uint64
	first, _ := old.FirstIndex()
	last, _ := old.LastIndex()
	conf := raft.Configuration{Servers: []raft.Server{
		{Suffrage: raft.Voter, ID: "a", Address: "a"}, {Suffrage: raft.Voter, ID: "b", Address: "b"}, {Suffrage: raft.Voter, ID: "c", Address: "c"}}}
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := old.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		if l.Type == raft.LogConfiguration {
			l.Data = raft.EncodeConfiguration(conf)
		}
		if err := logs.StoreLog(&l); err != nil {
			t.Fatal(err)
		}
		lastTerm = l.Term
	}
	if err := logs.SetUint64([]byte("CurrentTerm"), lastTerm); err != nil {
		t.Fatal(err)
	}
	if firstAppend >= last {
		t.Fatalf("first append at %d, last entry %d", firstAppend, last)
	}

	// Restart as a follower that will not campaign during the test.
	cfg.Bootstrap, cfg.DataDir = false, t.TempDir()
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Minute, time.Minute, time.Second
	cfg.WrapRaftStores = func(raft.LogStore, raft.StableStore) (raft.LogStore, raft.StableStore) { return logs, logs }
	n, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	_, leader := raft.NewInmemTransport("a")
	defer leader.Close()
	leader.Connect("b", n.stores.transport)
	n.stores.transport.(*raft.InmemTransport).Connect("a", leader)

	// The new leader of the next term appends its no-op; its commit index
	// is the one it learnt in the old term: the first append only.
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("a"), Addr: []byte("a")}
	send := func(req *raft.AppendEntriesRequest) {
		t.Helper()
		var resp raft.AppendEntriesResponse
		if err := leader.AppendEntries("b", "b", req, &resp); err != nil || !resp.Success {
			t.Fatalf("append entries: %v, %+v", err, resp)
		}
	}
	term := lastTerm + 1
	send(&raft.AppendEntriesRequest{RPCHeader: hdr, Term: term, PrevLogEntry: last, PrevLogTerm: lastTerm,
		Entries: []*raft.Log{{Index: last + 1, Term: term, Type: raft.LogNoop}}, LeaderCommitIndex: firstAppend})
	for n.FSM().AppliedIndex() < firstAppend {
		select {
		case <-ctx.Done():
			t.Fatal("the follower did not apply the commit index")
		case <-time.After(2 * time.Millisecond):
		}
	}
	time.Sleep(200 * time.Millisecond) // housekeeping ticks every 20 ms
	end := func() int64 {
		t.Helper()
		p, err := n.FSM().Partition("t", 0)
		if err != nil {
			t.Fatal(err)
		}
		return p.Log().EndOffset()
	}
	if n.Ready() {
		t.Fatalf("ready at commit index %d, from a leader with nothing committed in its term: end %d, below the 3 the node applied before its restart", firstAppend, end())
	}

	// The no-op commits: the follower applies everything and serves.
	send(&raft.AppendEntriesRequest{RPCHeader: hdr, Term: term, PrevLogEntry: last + 1, PrevLogTerm: term, LeaderCommitIndex: last + 1})
	for !n.Ready() {
		select {
		case <-ctx.Done():
			t.Fatal("the follower did not become ready")
		case <-time.After(2 * time.Millisecond):
		}
	}
	if e := end(); e != 3 {
		t.Fatalf("ready with end %d, want 3", e)
	}
}
