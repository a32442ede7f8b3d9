package replication

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
)

// TestDataGroupsDefaultKeepsExistingCluster: logd's default
// --data-groups-per-node (Config.DataGroupsPerNodeIsDefault) starts no
// data groups in a cluster that holds topics and has none, as a cluster
// from before data groups upgraded to this build: its topics stay in the
// meta group, and so do the ones created after (docs/operations.md,
// "Data groups"). An operator's value starts them, and the old topics
// stay where they are. A restart with 0 keeps the groups the cluster has:
// their replicas run again and new topics are placed over them.
func TestDataGroupsDefaultKeepsExistingCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newJoinCluster(t)
	n := c.open(ctx, "n1", true)
	create := func(n *Node, name string) []uint64 {
		t.Helper()
		if _, err := NewBackend(n).CreateTopic(ctx, backend.CreateTopic{Name: name, Partitions: 4}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		mt, err := n.FSM().Topic(name)
		if err != nil {
			t.Fatal(err)
		}
		return mt.Placement
	}
	restart := func(edit func(*Config)) *Node {
		t.Helper()
		n = c.restart(n, edit)
		waitFor(ctx, t, "n1 leads again", func() bool { return n.IsLeader() && n.Ready() }, func() string { return "" })
		return n
	}
	if pl := create(n, "old"); pl != nil {
		t.Fatalf("old placed over data groups without any: %v", pl)
	}

	// Upgraded to a default of 2: nothing starts.
	n = restart(func(cfg *Config) { cfg.DataGroupsPerNode, cfg.DataGroupsPerNodeIsDefault = 2, true })
	if got := n.dataGroupsPerNode(n.FSM().DataGroups()); got != 0 {
		t.Errorf("a cluster with topics and no data groups adds %d per node by default, want 0", got)
	}
	if pl := create(n, "new"); pl != nil {
		t.Errorf("new placed over data groups by default in a cluster without them: %v", pl)
	}
	if tab := n.FSM().DataGroups(); len(tab.Groups) != 0 {
		t.Errorf("data groups started by default in a cluster with topics: %+v", tab)
	}

	// The operator asks for 2: they start, and only new topics use them.
	n = restart(func(cfg *Config) { cfg.DataGroupsPerNode, cfg.DataGroupsPerNodeIsDefault = 2, false })
	waitFor(ctx, t, "two data groups led", func() bool { return len(n.DataGroupReplicas()) == 2 && leadsAll(n) }, func() string { return "" })
	if pl := create(n, "placed"); len(placementGroups(pl)) != 2 {
		t.Errorf("placed: placement %v, want over both data groups", pl)
	}
	for _, name := range []string{"old", "new"} {
		if mt, err := n.FSM().Topic(name); err != nil || mt.Placement != nil {
			t.Errorf("%s moved out of the meta group: %v, %v", name, mt.Placement, err)
		}
	}

	// Back to 0: the groups stay, run, and take new topics.
	n = restart(func(cfg *Config) { cfg.DataGroupsPerNode, cfg.DataGroupsPerNodeIsDefault = 0, false })
	waitFor(ctx, t, "two data groups led after a restart with 0", func() bool { return len(n.DataGroupReplicas()) == 2 && leadsAll(n) }, func() string { return "" })
	if pl := create(n, "later"); len(placementGroups(pl)) != 2 {
		t.Errorf("later: placement %v, want over both data groups", pl)
	}
	if got := len(n.FSM().DataGroups().Groups); got != 2 {
		t.Errorf("%d data groups after a restart with 0, want 2", got)
	}
}

// TestDataGroupsFirstTopicWaitsForPlacement: on a new cluster that is to
// have data groups, a topic created the moment the node serves, before
// the meta leader's first placement, waits for it and is placed over the
// data groups; it would otherwise stay in the meta group, and by default
// keep the cluster without data groups (awaitDataGroups).
func TestDataGroupsFirstTopicWaitsForPlacement(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newJoinCluster(t)
	cfg := Config{NodeID: "n1", DataDir: t.TempDir(), RaftBind: "127.0.0.1:0", Bootstrap: true, Logger: fsmtest.Logger(), RaftLogLevel: "error",
		DataGroupsPerNode: 2, DataGroupsPerNodeIsDefault: true, ClusterSecret: testClusterSecret,
		Fatal: func(err error) { t.Errorf("fatal: %v", err) }}
	n := c.start(cfg)
	waitFor(ctx, t, "n1 leads", func() bool { return n.IsLeader() && n.Ready() }, func() string { return "" })
	if _, err := NewBackend(n).CreateTopic(ctx, backend.CreateTopic{Name: "first", Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	mt, err := n.FSM().Topic("first")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(placementGroups(mt.Placement)); got != 2 {
		t.Errorf("first: placement %v, want over both data groups", mt.Placement)
	}
}

// TestDataGroupsClean: each data group replica runs a cleaner of its own,
// so retention reaches the partitions of a placed topic: past
// retention.ms a pass trims each partition in its group, the partition's
// state shows the run, and the node's counters count the trims.
func TestDataGroupsClean(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	clock := time.UnixMilli(1_700_000_000_000)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	n, err := Open(Config{NodeID: "n1", DataDir: t.TempDir(), RaftBind: "127.0.0.1:0", Bootstrap: true, Logger: fsmtest.Logger(),
		RaftLogLevel: "error", Fatal: func(err error) { t.Errorf("fatal: %v", err) }, Now: now, CleanerInterval: time.Hour,
		DataGroupsPerNode: 2, ClusterSecret: testClusterSecret})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	waitFor(ctx, t, "n1 leads two data groups", func() bool {
		return n.IsLeader() && n.Ready() && len(n.DataGroupReplicas()) == 2 && leadsAll(n)
	}, func() string { return "" })
	b := NewBackend(n)
	if _, err := b.CreateTopic(ctx, backend.CreateTopic{Name: "r", Partitions: 2, Config: map[string]string{
		fsm.ConfigRetentionMs: "1000", fsm.ConfigSegmentBytes: "100"}}); err != nil {
		t.Fatal(err)
	}
	mt, err := n.FSM().Topic("r")
	if err != nil || len(placementGroups(mt.Placement)) != 2 {
		t.Fatalf("r: placement %v, %v; want over both data groups", mt.Placement, err)
	}
	base := now().UnixMilli()
	for i := range 6 {
		p := int32(i % 2)
		rec := backend.ProduceRecord{Partition: p, HasPartition: true, TimestampMs: base, Value: []byte(strings.Repeat("v", 80))}
		if _, err := b.Produce(ctx, backend.ProduceRequest{Topic: "r", Records: []backend.ProduceRecord{rec}}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	clock = clock.Add(2 * time.Second)
	mu.Unlock()
	if err := n.Clean(ctx); err != nil {
		t.Fatal(err)
	}
	st := b.topicState(mt)
	for _, ps := range st.Partitions {
		if ps.LogStartOffset == 0 || ps.LastCleanerRun == nil {
			t.Errorf("r-%d in data group %d after a pass past retention.ms: %+v", ps.Partition, ps.Group, ps)
		}
	}
	if c := b.CleanerCounters(); c.Trims < 2 {
		t.Errorf("cleaner counters %+v, want a trim in each data group", c)
	}
	if s := n.CleanerStats(); s.Runs < 3 {
		t.Errorf("cleaner stats %+v, want a pass in the meta group and in each data group", s)
	}
}

// TestDataGroupsRestartedNodeServesWhenReady: a single node restarted
// over its data reports ready only once its data group replicas caught up
// with their groups (it is each group's only replica): from then on every
// partition of a placed topic reads back what was written, and a produce
// is appended, without a retry.
func TestDataGroupsRestartedNodeServesWhenReady(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newJoinCluster(t)
	c.configure = func(_ string, cfg *Config) { cfg.DataGroupsPerNode = 2 }
	n := c.open(ctx, "n1", true)
	waitFor(ctx, t, "n1 leads two data groups", func() bool {
		return n.Ready() && len(n.DataGroupReplicas()) == 2 && leadsAll(n)
	}, func() string { return "" })
	if _, err := NewBackend(n).CreateTopic(ctx, backend.CreateTopic{Name: "r", Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	for p := range int32(4) {
		rec := backend.ProduceRecord{Partition: p, HasPartition: true, Value: fmt.Appendf(nil, "v%d", p)}
		if _, err := NewBackend(n).Produce(ctx, backend.ProduceRequest{Topic: "r", Records: []backend.ProduceRecord{rec}}); err != nil {
			t.Fatal(err)
		}
	}
	n = c.restart(n, nil)
	waitFor(ctx, t, "n1 ready again", func() bool { return n.IsLeader() && n.Ready() }, func() string { return "" })
	b := NewBackend(n)
	for p := range int32(4) {
		if r, err := b.Read("r", p, 0, 1<<20); err != nil || len(r.Batches) == 0 || r.EndOffset != 1 {
			t.Errorf("r-%d read once ready: %d bytes, end %d, %v", p, len(r.Batches), r.EndOffset, err)
		}
	}
	if _, err := b.Produce(ctx, backend.ProduceRequest{Topic: "r", Records: []backend.ProduceRecord{{Value: []byte("after")}}}); err != nil {
		t.Errorf("produce once ready: %v", err)
	}
}

// TestDataGroupsLeaderReadsOfANewTopic: a read at a data group's leader
// (a consistent describe's or consume's bounds, ReadLeader) of a topic
// created a moment ago, before the group adopted it, answers its empty
// partitions: the leader adopts the topic first, rather than call it
// unknown.
func TestDataGroupsLeaderReadsOfANewTopic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newJoinCluster(t)
	c.configure = func(_ string, cfg *Config) { cfg.DataGroupsPerNode = 2 }
	n := c.open(ctx, "n1", true)
	waitFor(ctx, t, "n1 leads two data groups", func() bool {
		return n.Ready() && len(n.DataGroupReplicas()) == 2 && leadsAll(n)
	}, func() string { return "" })
	b := NewBackend(n)
	for i := range 3 {
		name := fmt.Sprintf("fresh-%d", i)
		if _, err := b.CreateTopic(ctx, backend.CreateTopic{Name: name, Partitions: 2}); err != nil {
			t.Fatal(err)
		}
		if o, err := b.OffsetsLeader(ctx, name, int32(i%2)); err != nil || o.End != 0 {
			t.Errorf("%s-%d bounds at the leader at once: %+v, %v", name, i%2, o, err)
		}
		if r, err := b.ReadLeader(ctx, name, int32((i+1)%2), 0, 1<<20); err != nil || r.EndOffset != 0 {
			t.Errorf("%s-%d read at the leader at once: end %d, %v", name, (i+1)%2, r.EndOffset, err)
		}
	}
}

// TestDataGroupsKeylessRun: keyless calls go to one data group until
// keylessRun records went there, then to the next: one-record calls meet
// in one group (whose coalescer then puts many in one Raft entry), over
// its partitions in turn; a call of more records than the run moves the
// next call on.
func TestDataGroupsKeylessRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newJoinCluster(t)
	c.configure = func(_ string, cfg *Config) { cfg.DataGroupsPerNode = 2 }
	n := c.open(ctx, "n1", true)
	waitFor(ctx, t, "n1 leads two data groups", func() bool {
		return n.Ready() && len(n.DataGroupReplicas()) == 2 && leadsAll(n)
	}, func() string { return "" })
	b := NewBackend(n)
	if _, err := b.CreateTopic(ctx, backend.CreateTopic{Name: "k", Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	mt, err := n.FSM().Topic("k")
	if err != nil {
		t.Fatal(err)
	}
	groupOf := func(recs int) (uint64, map[int32]bool) {
		t.Helper()
		res, err := b.Produce(ctx, backend.ProduceRequest{Topic: "k", Records: make([]backend.ProduceRecord, recs)})
		if err != nil {
			t.Fatal(err)
		}
		parts := map[int32]bool{}
		var gs []uint64
		for _, r := range res.Results {
			parts[r.Partition] = true
			if g := mt.Placement[r.Partition]; !slices.Contains(gs, g) {
				gs = append(gs, g)
			}
		}
		if len(gs) != 1 {
			t.Fatalf("a keyless call of %d records over groups %v", recs, gs)
		}
		return gs[0], parts
	}
	first, parts := groupOf(1)
	for range 9 {
		g, p := groupOf(1)
		if g != first {
			t.Fatalf("one-record keyless calls left group %d for %d within a run", first, g)
		}
		maps.Copy(parts, p)
	}
	if len(parts) != 2 {
		t.Errorf("ten one-record calls in group %d went to partitions %v, want both of its two", first, parts)
	}
	if g, _ := groupOf(keylessRun); g != first {
		t.Errorf("the call that ends the run went to group %d, want %d", g, first)
	}
	if g, _ := groupOf(1); g == first {
		t.Errorf("a call after %d records stayed in group %d", keylessRun+10, g)
	}
}
