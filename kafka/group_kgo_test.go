package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/internal/e2e"
	"github.com/logd-dev/logd/replication/replicationtest"
)

// Consumer groups with franz-go's kgo: its group consumer joins, syncs,
// heartbeats, fetches and commits offsets against the coordinator, with
// the assignor the test names (the leader member runs it).

// consumed is what the members of a test group consumed, by value.
type consumed struct {
	mu    sync.Mutex
	by    map[string][]string // value -> the members that consumed it
	count map[string]int      // member -> records
	first map[string]int64    // "member/partition" -> first offset consumed (per session)
}

func newConsumed() *consumed {
	return &consumed{by: map[string][]string{}, count: map[string]int{}, first: map[string]int64{}}
}

func (c *consumed) add(member string, r *kgo.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := string(r.Value)
	c.by[v] = append(c.by[v], member)
	c.count[member]++
	key := fmt.Sprintf("%s/%d", member, r.Partition)
	if _, ok := c.first[key]; !ok {
		c.first[key] = r.Offset
	}
}

func (c *consumed) total() (distinct, all int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ms := range c.by {
		all += len(ms)
	}
	return len(c.by), all
}

// groupMember runs a kgo group consumer until ctx ends: each poll's
// records are consumed, then their offsets committed, and only then may
// the client rebalance, so that a partition that moves is committed up to
// what was consumed and no record is consumed twice. Errors of the group
// session (a fenced generation) are counted, not fatal; others are.
type groupMember struct {
	name     string
	cl       *kgo.Client
	cancel   context.CancelFunc
	sessions int // group session errors seen; read after done
	err      error
	done     chan struct{}
}

func startGroupMember(t *testing.T, ctx context.Context, addr, name, groupID, topic string, c *consumed, opts ...kgo.Opt) *groupMember {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	cl := newKgo(t, addr, append([]kgo.Opt{
		kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic), kgo.ClientID(name),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(3 * time.Second), kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.RebalanceTimeout(10 * time.Second), kgo.FetchMaxWait(200 * time.Millisecond),
	}, opts...)...)
	m := &groupMember{name: name, cl: cl, cancel: cancel, done: make(chan struct{})}
	t.Cleanup(func() {
		// Before the client closes (cleanups run last first): a client
		// that blocks rebalances leaves its group only once allowed.
		cancel()
		<-m.done
		cl.AllowRebalance()
	})
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			fs.EachError(func(topic string, p int32, err error) {
				var gs *kgo.ErrGroupSession
				if errors.As(err, &gs) {
					m.sessions++
					return
				}
				if m.err == nil && !errors.Is(err, context.Canceled) {
					m.err = fmt.Errorf("%s: fetch %s-%d: %w", name, topic, p, err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) { c.add(name, r) })
			// What was consumed is committed even when the member is being
			// stopped meanwhile: its context does not bound the commit.
			cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := cl.CommitUncommittedOffsets(cctx); err != nil && m.err == nil {
				m.err = fmt.Errorf("%s: commit: %w", name, err)
			}
			ccancel()
			cl.AllowRebalance()
		}
	}()
	return m
}

// stop ends the member's loop and leaves the group.
func (m *groupMember) stop(t *testing.T) {
	t.Helper()
	m.cancel()
	<-m.done
	m.cl.AllowRebalance() // a poll may have returned since the last
	m.cl.Close()
	if m.err != nil {
		t.Error(m.err)
	}
}

// produceValues produces values round-robin over the topic's partitions,
// chunk records at a time (so in batches of a few records each).
func produceValues(t *testing.T, ctx context.Context, addr, topic string, from, to, chunk int) {
	t.Helper()
	cl := newKgo(t, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	defer cl.Close()
	for i := from; i < to; i += chunk {
		recs := make([]*kgo.Record, 0, chunk)
		for j := i; j < min(i+chunk, to); j++ {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "%s-%05d", topic, j)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}

// waitFor polls cond until it holds, failing after d; a long wait logs
// what it waits for (e2e.WaitFor).
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	e2e.WaitFor(t, ctx, what, cond)
}

// assignedMembers counts the members of a stable group that were assigned
// at least one partition.
func assignedMembers(tn *testNode, groupID string) int {
	c := tn.srv.groups
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[groupID]
	if g == nil || g.state != groupStable {
		return 0
	}
	n := 0
	for _, m := range g.members {
		var a kmsg.ConsumerMemberAssignment
		if a.ReadFrom(m.assignment) == nil && len(a.Topics) > 0 && len(a.Topics[0].Partitions) > 0 {
			n++
		}
	}
	return n
}

// waitCommittedEnd waits until the group committed every partition of the
// topic up to its end.
func waitCommittedEnd(t *testing.T, tn *testNode, groupID, topic string, partitions int32) {
	t.Helper()
	waitFor(t, 20*time.Second, "commits up to the end", func() bool {
		g, err := tn.backend.ConsumerGroup(groupID)
		if err != nil || g.Topics[topic] == nil {
			return false
		}
		for p := range partitions {
			o, err := tn.backend.Offsets(topic, p)
			if err != nil || g.Topics[topic].Partitions[p].Committed != o.End {
				return false
			}
		}
		return true
	})
}

// TestKgoGroupConsumers: two kgo members of one group, with the
// cooperative-sticky assignor (kgo's default, several join rounds), and
// with the range and round-robin assignors (eager: every partition is
// revoked at each rebalance), consume every record of a topic exactly once between them,
// while it is written: the first alone, then both once the second joined.
// Their commits are logd's group offsets, at the end of every partition.
func TestKgoGroupConsumers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
		node     replicationtest.Options
	}{
		{"cooperative-sticky", kgo.CooperativeStickyBalancer(), replicationtest.Options{}},
		{"range", kgo.RangeBalancer(), replicationtest.Options{}},
		{"round-robin", kgo.RoundRobinBalancer(), replicationtest.Options{}},
		// The topic's partitions over three data groups: the group's
		// state stays in the meta group, and each commit carries its
		// partitions' ends.
		{"data-groups", kgo.CooperativeStickyBalancer(), replicationtest.Options{DataGroupsPerNode: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := startNodeWith(t, tc.node, fastGroups)
			tn.createTopic("work", 6, nil)
			if tp, err := tn.node.FSM().Topic("work"); err != nil || (tc.node.DataGroupsPerNode > 0) != (tp.Placement != nil) {
				t.Fatalf("work's placement: %v, %v", tp, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			const total = 600
			prod := newKgo(t, tn.addr, kgo.DefaultProduceTopic("work"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
			produced := make(chan error, 1)
			go func() {
				for i := 0; i < total; i += 6 {
					recs := make([]*kgo.Record, 6)
					for j := range recs {
						recs[j] = &kgo.Record{Value: fmt.Appendf(nil, "work-%05d", i+j)}
					}
					if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
						produced <- err
						return
					}
					time.Sleep(2 * time.Millisecond) // pace the writes over the rebalance
				}
				produced <- nil
			}()

			c := newConsumed()
			opts := []kgo.Opt{kgo.Balancers(tc.balancer), kgo.FetchMaxPartitionBytes(1)}
			a := startGroupMember(t, ctx, tn.addr, "a", "g", "work", c, opts...)
			waitFor(t, 30*time.Second, "a consumes", func() bool { n, _ := c.total(); return n >= 60 })
			atJoin, _ := c.total()
			b := startGroupMember(t, ctx, tn.addr, "b", "g", "work", c, opts...)
			waitFor(t, 30*time.Second, "both members assigned", func() bool { return assignedMembers(tn, "g") == 2 })
			if err := <-produced; err != nil {
				t.Fatalf("produce: %v", err)
			}
			waitFor(t, 30*time.Second, "every record consumed", func() bool { n, _ := c.total(); return n == total })
			waitCommittedEnd(t, tn, "g", "work", 6)
			a.stop(t)
			b.stop(t)

			distinct, all := c.total()
			if distinct != total || all != total {
				for v, ms := range c.by {
					if len(ms) > 1 {
						t.Errorf("%s consumed by %v", v, ms)
					}
				}
				t.Fatalf("%d distinct records consumed %d times; want %d once each", distinct, all, total)
			}
			if c.count["b"] == 0 || c.count["a"] <= atJoin {
				t.Fatalf("a consumed %d (%d before b joined), b %d; want both some after b joined", c.count["a"], atJoin, c.count["b"])
			}
			t.Logf("%s: a consumed %d (%d before b joined), b %d", tc.name, c.count["a"], atJoin, c.count["b"])
		})
	}
}

// TestKgoGroupResetBetweenSessions: an offset reset between two sessions
// of a group (what `logctl group reset-offsets --to-offset` proposes)
// moves where the next session starts.
func TestKgoGroupResetBetweenSessions(t *testing.T) {
	tn := startNode(t, fastGroups)
	tn.createTopic("replay", 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	produceValues(t, ctx, tn.addr, "replay", 0, 60, 60)

	c := newConsumed()
	s1 := startGroupMember(t, ctx, tn.addr, "s1", "r", "replay", c)
	waitFor(t, 30*time.Second, "the first session consumes all", func() bool { n, _ := c.total(); return n == 60 })
	waitCommittedEnd(t, tn, "r", "replay", 2)
	s1.stop(t)

	var offsets []group.OffsetCommit
	for p := range int32(2) {
		offsets = append(offsets, group.OffsetCommit{TopicPartition: group.TopicPartition{Topic: "replay", Partition: p}, Offset: 10})
	}
	if err := tn.backend.ResetGroupOffsets(ctx, backend.GroupResetOffsets{Group: "r", Offsets: offsets}); err != nil {
		t.Fatal(err)
	}

	s2 := startGroupMember(t, ctx, tn.addr, "s2", "r", "replay", c)
	waitFor(t, 30*time.Second, "the second session consumes from the reset", func() bool { return c.countOf("s2") == 40 })
	waitCommittedEnd(t, tn, "r", "replay", 2)
	s2.stop(t)
	for p := range 2 {
		if first := c.firstOf(fmt.Sprintf("s2/%d", p)); first != 10 {
			t.Errorf("the second session started partition %d at %d; want the reset's 10", p, first)
		}
	}
}

// TestKgoResetFencesLiveMember: a reset while a kgo member consumes
// fences its generation: the member's session ends (kgo reports it), it
// drops its partitions and positions, joins again and consumes from the
// reset offsets, which its commits from before cannot overwrite.
func TestKgoResetFencesLiveMember(t *testing.T) {
	tn := startNode(t, fastGroups)
	tn.createTopic("fence", 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	produceValues(t, ctx, tn.addr, "fence", 0, 40, 40)

	c := newConsumed()
	m := startGroupMember(t, ctx, tn.addr, "m", "f", "fence", c)
	waitFor(t, 30*time.Second, "the member consumes all", func() bool { n, _ := c.total(); return n == 40 })
	waitCommittedEnd(t, tn, "f", "fence", 2)

	var offsets []group.OffsetCommit
	for p := range int32(2) {
		offsets = append(offsets, group.OffsetCommit{TopicPartition: group.TopicPartition{Topic: "fence", Partition: p}, Offset: 0})
	}
	if err := tn.backend.ResetGroupOffsets(ctx, backend.GroupResetOffsets{Group: "f", Offsets: offsets}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the member consumes again from the reset", func() bool { _, all := c.total(); return all == 80 })
	waitCommittedEnd(t, tn, "f", "fence", 2)
	m.stop(t)
	if m.sessions == 0 {
		t.Error("kgo reported no end of its group session")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for v, ms := range c.by {
		if len(ms) != 2 {
			t.Errorf("%s consumed %d times; want twice (before and after the reset)", v, len(ms))
		}
	}
}

func (c *consumed) countOf(member string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count[member]
}

func (c *consumed) firstOf(key string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.first[key]; ok {
		return v
	}
	return -1
}

// TestKgoSimpleCommit: a client outside any group session commits with
// generation -1 and no member id (what admin tools and consumers that
// assign partitions themselves send; kgo finds the coordinator with
// FindCoordinator), which works while the group has no members; a group
// member then starts at those offsets.
func TestKgoSimpleCommit(t *testing.T) {
	tn := startNode(t, fastGroups)
	tn.createTopic("manual", 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	produceValues(t, ctx, tn.addr, "manual", 0, 40, 40)

	cl := newKgo(t, tn.addr)
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = "manual-group"
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "manual"
	for p := range int32(2) {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, int64(7+p)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("commit of partition %d: %s", p.Partition, errorName(p.ErrorCode))
		}
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group = "manual-group"
	fresp, err := fetch.RequestWith(ctx, cl)
	if err != nil || len(fresp.Topics) != 1 || len(fresp.Topics[0].Partitions) != 2 || fresp.Topics[0].Partitions[1].Offset != 8 {
		t.Fatalf("offset fetch of every partition: %+v %v", fresp, err)
	}

	c := newConsumed()
	m := startGroupMember(t, ctx, tn.addr, "m", "manual-group", "manual", c)
	waitFor(t, 30*time.Second, "the member consumes from the committed offsets", func() bool { return c.countOf("m") == 40-7-8 })
	// While the member is in, a commit outside the group is refused.
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.Topics[0].Partitions[0].ErrorCode != errUnknownMemberID {
		t.Fatalf("a commit outside the group while it has a member: %+v %v", resp, err)
	}
	m.stop(t)
	for p := range 2 {
		if first := c.firstOf(fmt.Sprintf("m/%d", p)); first != int64(7+p) {
			t.Errorf("the member started partition %d at %d; want %d", p, first, 7+p)
		}
	}
}

// TestKgoGroupChurn: members of a cooperative-sticky group start and
// leave while records are written, then the group settles with every
// member in: every record is consumed exactly once over all of them (no
// partition had two owners at once, and no commit was lost or landed
// late), and the group commits every partition up to its end. The short
// variant churns for a few seconds; LOGD_FAULT_LONG=1 churns for a minute
// with more records.
func TestKgoGroupChurn(t *testing.T) {
	total, churn, every := 1200, 3*time.Second, 300*time.Millisecond
	if e2e.FaultLong() {
		total, churn, every = 30_000, time.Minute, 2*time.Second
	}
	tn := startNode(t, fastGroups)
	tn.createTopic("churn", 6, nil)
	// The producer paces its calls over the churn, but on a loaded
	// machine each synchronous call takes longer than its pace: the
	// bound is what the test waits at most, not how fast it must go.
	ctx, cancel := context.WithTimeout(context.Background(), churn+10*time.Minute)
	defer cancel()

	prod := newKgo(t, tn.addr, kgo.DefaultProduceTopic("churn"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produced := make(chan error, 1)
	pace := churn / time.Duration(total/6)
	go func() {
		for i := 0; i < total; i += 6 {
			recs := make([]*kgo.Record, 6)
			for j := range recs {
				recs[j] = &kgo.Record{Value: fmt.Appendf(nil, "churn-%06d", i+j)}
			}
			if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				produced <- err
				return
			}
			time.Sleep(pace)
		}
		produced <- nil
	}()

	c := newConsumed()
	opts := []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.FetchMaxPartitionBytes(1)}
	slots := make([]*groupMember, 3)
	started := 0
	start := func(i int) {
		started++
		slots[i] = startGroupMember(t, ctx, tn.addr, fmt.Sprintf("m%d", started), "churn", "churn", c, opts...)
	}
	start(0)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for end, i := time.Now().Add(churn), 0; time.Now().Before(end); i++ {
		<-tick.C
		s := i % len(slots)
		if slots[s] != nil {
			slots[s].stop(t)
			slots[s] = nil
		} else {
			start(s)
		}
	}
	for i := range slots {
		if slots[i] == nil {
			start(i)
		}
	}
	if err := <-produced; err != nil {
		t.Fatalf("produce: %v", err)
	}
	waitFor(t, time.Minute, "every record consumed", func() bool { n, _ := c.total(); return n == total })
	waitCommittedEnd(t, tn, "churn", "churn", 6)
	for _, m := range slots {
		m.stop(t)
	}
	distinct, all := c.total()
	if distinct != total || all != total {
		n := 0
		for v, ms := range c.by {
			if len(ms) > 1 && n < 10 {
				t.Errorf("%s consumed by %v", v, ms)
				n++
			}
		}
		t.Fatalf("%d distinct records consumed %d times; want %d once each", distinct, all, total)
	}
	t.Logf("%d records, %d members over the run", total, started)
}
