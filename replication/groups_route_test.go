package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/replication/catchup"
	"github.com/logd-dev/logd/replication/fsm"
)

// namesLedApart returns two group names whose homes (fsm.HashedHome over
// the table l holds) are data groups led by different nodes, with those
// homes.
func namesLedApart(t *testing.T, l *Node, leaders map[uint64]string) (names [2]string, homes [2]uint64) {
	t.Helper()
	tab := l.FSM().DataGroups()
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("billing-%d", i)
		h := fsm.HashedHome(name, tab)
		if leaders[h] == "" {
			continue
		}
		switch {
		case names[0] == "":
			names[0], homes[0] = name, h
		case leaders[h] != leaders[homes[0]]:
			names[1], homes[1] = name, h
			return names, homes
		}
	}
	t.Fatalf("no two names hash to data groups led by two nodes: %v", leaders)
	return names, homes
}

// TestConsumerGroupsInDataGroups: with data groups, a new consumer group
// gets a home, the data group its name hashes to, which the meta group
// records; its state is there, not in the meta group. Members join,
// commit and fetch through any node (the node routes to the home's leader
// or asks a replica of it); each group's coordinator is its home's
// leader, so two groups homed in groups led by two nodes name two nodes;
// a Kafka group's commits go there too. When the home's leader stops,
// another replica leads it, the coordinator moves with it, and the
// committed offsets are still there, read and committed through any
// node. A group logd keeps for itself stays in the meta group.
func TestConsumerGroupsInDataGroups(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, nodes, describe := dataGroupCluster(ctx, t, func(cfg *Config) { cfg.DataGroupsPerNode, cfg.ReplicationFactor = 2, 3 })
	l := nodes[0]
	waitGroupsSettled(ctx, t, l, nodes, 6, describe)
	waitFor(ctx, t, "every group led by its preferred leader", func() bool {
		_, leaders := dataGroupsView(nodes)
		for _, g := range l.FSM().DataGroups().Groups {
			if leaders[g.ID] != g.Replicas[0] {
				return false
			}
		}
		return true
	}, describe)
	// The meta group's leader (loaded machines lose one now and then).
	leader := func() *Backend {
		var out *Node
		waitFor(ctx, t, "a meta leader", func() bool {
			for _, n := range nodes {
				c.mu.Lock()
				closed := c.closed[n]
				c.mu.Unlock()
				if !closed && n.IsLeader() && n.Ready() {
					out = n
				}
			}
			return out != nil
		}, describe)
		return NewBackend(out)
	}
	if _, err := leader().CreateTopic(ctx, backend.CreateTopic{Name: "orders", Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	fill := make([]backend.ProduceRecord, 0, 20)
	for i := range 20 {
		fill = append(fill, backend.ProduceRecord{Partition: int32(i % 4), HasPartition: true, Value: []byte("v")})
	}
	lb := leader()
	if _, err := lb.Produce(ctx, backend.ProduceRequest{Topic: "orders", Records: fill}); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if err := NewBackend(n).AwaitApplied(ctx, lb.FSM().AppliedIndex(), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	_, leaders := dataGroupsView(nodes)
	names, homes := namesLedApart(t, l, leaders)
	for i, name := range names {
		// Join through one node, commit through the next, read through
		// the third.
		via := func(k int) *Backend { return NewBackend(nodes[(i+k)%len(nodes)]) }
		a, err := via(0).JoinGroup(ctx, backend.GroupJoin{Group: name, Member: "m1", Topics: []string{"orders"}, SessionTimeoutMs: 60000})
		if err != nil || len(a.Partitions) != 4 {
			t.Fatalf("%s: join: %+v, %v", name, a, err)
		}
		var at3 []group.OffsetCommit
		for p := range int32(4) {
			at3 = append(at3, group.OffsetCommit{TopicPartition: group.TopicPartition{Topic: "orders", Partition: p}, Offset: 3})
		}
		if err := via(1).CommitGroupOffsets(ctx, backend.GroupCommit{Group: name, Member: "m1", Generation: a.Generation, Offsets: at3}); err != nil {
			t.Fatalf("%s: commit: %v", name, err)
		}
		above := []group.OffsetCommit{{TopicPartition: group.TopicPartition{Topic: "orders", Partition: 1}, Offset: 6}}
		if err := via(1).CommitGroupOffsets(ctx, backend.GroupCommit{Group: name, Member: "m1", Generation: a.Generation, Offsets: above}); !errors.Is(err, group.ErrOffsetAboveEnd) {
			t.Fatalf("%s: commit above the end: %v, want ErrOffsetAboveEnd", name, err)
		}
		if err := via(2).AwaitGroupFetch(ctx, backend.GroupFetchCheck{Group: name, Member: "m1", Generation: a.Generation,
			Partition: group.TopicPartition{Topic: "orders", Partition: 2}, Offset: 3}, 5*time.Second); err != nil {
			t.Fatalf("%s: fetch check: %v", name, err)
		}
		if err := via(2).AwaitGroupFetch(ctx, backend.GroupFetchCheck{Group: name, Member: "m2", Generation: a.Generation,
			Partition: group.TopicPartition{Topic: "orders", Partition: 2}, Offset: 3}, time.Second); !errors.Is(err, group.ErrUnknownMember) {
			t.Fatalf("%s: fetch check of a stranger: %v, want ErrUnknownMember", name, err)
		}
		// A read through another node serves what its replica of the
		// home applied: the commit, soon.
		waitFor(ctx, t, fmt.Sprintf("%s: the commit read through %s", name, nodes[(i+2)%len(nodes)].NodeID()), func() bool {
			g, err := via(2).ConsumerGroup(name)
			return err == nil && g.Topics["orders"].Partitions[2].Committed == 3
		}, describe)
		// The meta group records the home, and holds none of the state.
		for _, n := range nodes {
			waitFor(ctx, t, fmt.Sprintf("%s applies the home of %s", n.NodeID(), name), func() bool {
				h, ok := n.FSM().GroupHome(name)
				return ok && h == homes[i]
			}, describe)
			if _, err := n.FSM().ConsumerGroup(name); !errors.Is(err, group.ErrConsumerGroupNotFound) {
				t.Fatalf("%s: the meta group holds the group: %v", name, err)
			}
		}
		if _, err := nodes[0].dataGroup(homes[i]).fsm.ConsumerGroup(name); err != nil {
			t.Fatalf("%s: data group %d does not hold it: %v", name, homes[i], err)
		}
		// Every node names the home's leader as the coordinator.
		for _, n := range nodes {
			if got := NewBackend(n).GroupCoordinator(ctx, name); got != leaders[homes[i]] {
				t.Fatalf("%s: %s names %q as the coordinator, want %s", name, n.NodeID(), got, leaders[homes[i]])
			}
		}
		if leads, _ := NewBackend(n0(nodes, leaders[homes[i]])).LeadsGroup(ctx, name, false); !leads {
			t.Fatalf("%s: its home's leader does not lead it", name)
		}
	}
	if leaders[homes[0]] == leaders[homes[1]] {
		t.Fatalf("both groups' coordinators are %s", leaders[homes[0]])
	}
	// Listing through any node merges every home.
	for _, n := range nodes {
		listed := map[string]bool{}
		for _, g := range NewBackend(n).ConsumerGroups() {
			listed[g.Name] = true
		}
		if !listed[names[0]] || !listed[names[1]] {
			t.Fatalf("%s lists %v", n.NodeID(), listed)
		}
	}
	// A Kafka group's commit, from a node that does not lead its home.
	kname := names[0] + "-kafka"
	kb := NewBackend(l)
	if err := kb.SetGroupOffsets(ctx, backend.GroupSetOffsets{Group: kname, Fence: group.NoFence, Offsets: []group.OffsetCommit{{TopicPartition: group.TopicPartition{Topic: "orders"}, Offset: 2}}}); err != nil {
		t.Fatalf("a Kafka group's commit: %v", err)
	}
	if gen, live, ok := kb.GroupFence(kname); !ok || gen != 0 || live != 0 {
		t.Fatalf("the Kafka group's fence: %d %d %v", gen, live, ok)
	}
	// A redrive job's group stays in the meta group.
	internal := group.RedrivePrefix + "job"
	if err := kb.SetGroupOffsets(ctx, backend.GroupSetOffsets{Group: internal, Fence: group.NoFence, Offsets: []group.OffsetCommit{{TopicPartition: group.TopicPartition{Topic: "orders"}, Offset: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := leader().FSM().ConsumerGroup(internal); err != nil {
		t.Fatalf("a redrive job's group is not in the meta group: %v", err)
	}

	// The leader of the first group's home stops: another replica leads
	// the home, and the group with it.
	old := n0(nodes, leaders[homes[0]])
	c.mu.Lock()
	c.closed[old] = true
	c.mu.Unlock()
	c.close(old)
	var rest []*Node
	for _, n := range nodes {
		if n != old {
			rest = append(rest, n)
		}
	}
	var now string
	waitFor(ctx, t, "a new leader of the first group's home", func() bool {
		_, ls := dataGroupsView(rest)
		now = ls[homes[0]]
		return now != "" && now != old.NodeID()
	}, describe)
	for _, n := range rest {
		waitFor(ctx, t, fmt.Sprintf("%s names the new coordinator", n.NodeID()), func() bool {
			return NewBackend(n).GroupCoordinator(ctx, names[0]) == now
		}, describe)
		if g, err := NewBackend(n).ConsumerGroup(names[0]); err != nil || g.Topics["orders"].Partitions[0].Committed != 3 {
			t.Fatalf("%s after the leader change, through %s: %+v, %v", names[0], n.NodeID(), g, err)
		}
	}
	// The member commits again through either remaining node.
	g, _ := NewBackend(rest[0]).ConsumerGroup(names[0])
	for i, n := range rest {
		off := int64(4 + i)
		err := NewBackend(n).CommitGroupOffsets(ctx, backend.GroupCommit{Group: names[0], Member: "m1", Generation: g.Generation,
			Offsets: []group.OffsetCommit{{TopicPartition: group.TopicPartition{Topic: "orders", Partition: 0}, Offset: off}}})
		if err != nil {
			t.Fatalf("commit through %s after the leader change: %v", n.NodeID(), err)
		}
	}
	// The last commit went through rest[1], whose reads see it.
	if g, err := NewBackend(rest[1]).ConsumerGroup(names[0]); err != nil || g.Topics["orders"].Partitions[0].Committed != 5 {
		t.Fatalf("after the commits: %+v, %v", g, err)
	}
}

// n0 returns the node of nodes with id.
func n0(nodes []*Node, id string) *Node {
	for _, n := range nodes {
		if n.NodeID() == id {
			return n
		}
	}
	return nil
}

// TestConsumerGroupsBelowLevel: while a member's build is below
// fsm.HashedGroupsLevel, consumer groups stay in the meta group as
// before (a follower refuses their writes, which the server forwards to
// the leader), and a group-place is refused before it is proposed. Once
// every member is at the level, a group from before stays in the meta
// group and is served through any node; a new one goes to a data group.
func TestConsumerGroupsBelowLevel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, nodes, describe := dataGroupClusterOf(ctx, t, func(id string, cfg *Config) {
		cfg.DataGroupsPerNode, cfg.ReplicationFactor = 1, 3
		if id == "n3" {
			cfg.FeatureLevel = backend.FeatureLevel(fsm.HashedGroupsLevel - 1)
		}
	})
	l := nodes[0]
	waitGroupsSettled(ctx, t, l, nodes, 3, describe)
	lb := NewBackend(l)
	if _, err := lb.CreateTopic(ctx, backend.CreateTopic{Name: "orders", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := lb.Produce(ctx, backend.ProduceRequest{Topic: "orders", Records: []backend.ProduceRecord{
		{HasPartition: true, Value: []byte("a")}, {HasPartition: true, Value: []byte("b")}, {HasPartition: true, Value: []byte("c")}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "n3 registers its level", func() bool {
		return l.FSM().NodeFeatureLevel("n3") == fsm.HashedGroupsLevel-1
	}, describe)
	if lb.RoutesGroups() {
		t.Fatal("routes groups with a member below the level")
	}
	join := backend.GroupJoin{Group: "old", Member: "m1", Topics: []string{"orders"}, SessionTimeoutMs: 60000}
	a, err := lb.JoinGroup(ctx, join)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.FSM().ConsumerGroup("old"); err != nil {
		t.Fatalf("below the level a group is not in the meta group: %v", err)
	}
	if _, ok := l.FSM().GroupHome("old"); ok {
		t.Fatal("below the level a group was placed")
	}
	if _, err := NewBackend(nodes[1]).JoinGroup(ctx, join); !errors.Is(err, backend.ErrNotLeader) {
		t.Fatalf("a join on a follower below the level: %v, want ErrNotLeader", err)
	}
	place, err := fsm.EncodeJSON(fsm.CmdGroupPlace, time.Now().UnixNano(), fsm.GroupPlace{Group: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var fe *backend.FeatureLevelError
	if _, err := l.propose(ctx, place); !errors.As(err, &fe) || fe.Need != backend.FeatureLevel(fsm.HashedGroupsLevel) {
		t.Fatalf("a group-place below the level: %v", err)
	}

	// n3 comes back at this build's level, and registers it through the
	// leader.
	reg := &registrar{c: c}
	nodes[2] = c.restart(nodes[2], func(cfg *Config) { cfg.FeatureLevel, cfg.Register = backend.FeatureLevel(fsm.Level), reg.ask })
	waitFor(ctx, t, "every node sees every member at the level", func() bool {
		for _, n := range nodes {
			if !n.RoutesGroups() {
				return false
			}
		}
		return true
	}, describe)
	for i, n := range nodes {
		off := int64(i)
		if err := NewBackend(n).CommitGroupOffsets(ctx, backend.GroupCommit{Group: "old", Member: "m1", Generation: a.Generation,
			Offsets: []group.OffsetCommit{{TopicPartition: group.TopicPartition{Topic: "orders"}, Offset: off}}}); err != nil {
			t.Fatalf("a commit of the old group through %s: %v", n.NodeID(), err)
		}
	}
	if g, err := l.FSM().ConsumerGroup("old"); err != nil || g.Topics["orders"].Partitions[0].Committed != 2 {
		t.Fatalf("the old group in the meta group: %+v, %v", g, err)
	}
	if h, ok := l.FSM().GroupHome("old"); ok && h != 0 {
		t.Fatalf("the old group moved to data group %d", h)
	}
	if _, err := NewBackend(nodes[1]).JoinGroup(ctx, backend.GroupJoin{Group: "new", Member: "m1", Topics: []string{"orders"}, SessionTimeoutMs: 60000}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the new group's home applied", func() bool {
		h, ok := l.FSM().GroupHome("new")
		return ok && h != 0
	}, describe)
}

// BenchmarkGroupCommitsSpread measures consumer group commits through
// every node of a three-node cluster with six data groups (two per node,
// each led by its preferred leader): "meta" commits groups kept in the
// meta group (names of logd's own groups, which stay there), every
// commit an entry of the meta leader's log; "hashed" commits groups in
// the data groups their names hash to, spread over six logs and three
// leaders. Eight groups, committing outside a generation (as a Kafka
// group's coordinator does), from 64 or 256 proposers. The nodes share
// this machine's disk, so the fsyncs of all the logs queue on it.
func BenchmarkGroupCommitsSpread(b *testing.B) {
	for _, proposers := range []int{64, 256} {
		for _, where := range []string{"meta", "hashed"} {
			b.Run(fmt.Sprintf("%s/proposers=%d", where, proposers), func(b *testing.B) { benchGroupCommits(b, where, proposers) })
		}
	}
}

// benchGroupCommits is one run of BenchmarkGroupCommitsSpread.
func benchGroupCommits(b *testing.B, where string, proposers int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_, nodes, describe := dataGroupCluster(ctx, b, func(cfg *Config) {
		cfg.DataGroupsPerNode, cfg.ReplicationFactor = 2, 3
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	})
	l := nodes[0]
	waitGroupsSettled(ctx, b, l, nodes, 6, describe)
	if _, err := NewBackend(l).CreateTopic(ctx, backend.CreateTopic{Name: "orders", Partitions: 8}); err != nil {
		b.Fatal(err)
	}
	var recs []backend.ProduceRecord
	for p := range int32(8) {
		recs = append(recs, backend.ProduceRecord{Partition: p, HasPartition: true, Value: []byte("v")})
	}
	if _, err := NewBackend(l).Produce(ctx, backend.ProduceRequest{Topic: "orders", Records: recs}); err != nil {
		b.Fatal(err)
	}
	for _, n := range nodes {
		if err := NewBackend(n).AwaitApplied(ctx, l.FSM().AppliedIndex(), time.Minute); err != nil {
			b.Fatal(err)
		}
	}
	var names []string
	for i := range 8 {
		name := fmt.Sprintf("bench-%d", i)
		if where == "meta" {
			name = group.RedrivePrefix + name
		}
		names = append(names, name)
	}
	var next atomic.Int64
	b.SetParallelism(max(1, proposers/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1)
			n := nodes[i%int64(len(nodes))]
			err := NewBackend(n).SetGroupOffsets(ctx, backend.GroupSetOffsets{Group: names[i%int64(len(names))], Fence: group.NoFence,
				Offsets: []group.OffsetCommit{{TopicPartition: group.TopicPartition{Topic: "orders", Partition: int32(i % 8)}, Offset: 1}}})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}

// TestBackupGroupsCutsHomes: a backup cuts the data groups the meta cut
// places partitions in and those that are consumer groups' homes, each
// once, ascending (a group holding only consumer groups would be left out
// of the backup otherwise, and its groups' offsets with it).
func TestBackupGroupsCutsHomes(t *testing.T) {
	meta := catchup.CutInfo{Topics: []fsm.SnapshotTopic{{Name: "orders", Placement: []uint64{2, 1, 2}}, {Name: "legacy"}}}
	for _, c := range []struct {
		homes []uint64
		want  []uint64
	}{
		{nil, []uint64{1, 2}},
		{[]uint64{2}, []uint64{1, 2}},
		{[]uint64{5, 3}, []uint64{1, 2, 3, 5}},
	} {
		if got := backupGroups(meta, c.homes); !slices.Equal(got, c.want) {
			t.Errorf("homes %v: cuts %v, want %v", c.homes, got, c.want)
		}
	}
}
