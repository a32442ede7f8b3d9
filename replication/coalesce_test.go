package replication

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/queue"
	"github.com/logd-dev/logd/replication/fsm"
)

// holdCoalescer makes c queue appends without submitting them (as while
// its goroutine hands the previous entry to Raft); release submits what
// queued to r.
func holdCoalescer(n *Node, c *coalescer, r *raft.Raft) (queued func() int, release func()) {
	c.mu.Lock()
	c.running = true
	c.mu.Unlock()
	queued = func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.queue)
	}
	release = func() {
		n.applyWaiters.Add(1)
		go func() {
			defer n.applyWaiters.Add(-1)
			n.submitQueued(c, r)
		}()
	}
	return queued, release
}

// recordValues reads every record value of a partition through b.
func recordValues(t *testing.T, b *Backend, topic string, p int32) []string {
	t.Helper()
	r, err := b.Read(topic, p, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := batch.Records(r.Batches, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rec := range recs {
		out = append(out, string(rec.Value))
	}
	return out
}

// produceOutcome is one call's answer.
type produceOutcome struct {
	res backend.ProduceResult
	err error
}

// queueProduces starts each call in order, each once the one before has
// queued, so the coalescer holds them in that order.
func queueProduces(t *testing.T, ctx context.Context, b *Backend, queued func() int, reqs []backend.ProduceRequest) []chan produceOutcome {
	t.Helper()
	out := make([]chan produceOutcome, len(reqs))
	for i, req := range reqs {
		out[i] = make(chan produceOutcome, 1)
		go func() {
			res, err := b.Produce(ctx, req)
			out[i] <- produceOutcome{res, err}
		}()
		waitFor(ctx, t, fmt.Sprintf("call %d queued", i), func() bool { return queued() == i+1 }, func() string { return "" })
	}
	return out
}

// TestCoalescedProducesKeepTheirOutcomes: produce calls that arrive while
// the group is busy share one Raft entry, and each is answered as if it
// had its own: records in the order the calls arrived, mixed keyed and
// unkeyed, a repeated idempotency key answered as a duplicate of the
// first, and the calls past a queue group's backlog bound refused alone,
// in order.
func TestCoalescedProducesKeepTheirOutcomes(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	b := openBackend(t, ctx, 2)
	n := b.Node
	if _, err := b.CreateTopic(ctx, backend.CreateTopic{Name: "jobs", Partitions: 1, Config: map[string]string{fsm.ConfigQueueMaxBacklogRecords: "3"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateQueueGroup(ctx, backend.QueueCreate{Topic: "jobs", Group: "w", Config: queue.Config{MaxDeliveries: 3}}); err != nil {
		t.Fatal(err)
	}
	var reqs []backend.ProduceRequest
	for i := range 4 {
		reqs = append(reqs, backend.ProduceRequest{Topic: "t", Records: []backend.ProduceRecord{{Partition: 0, HasPartition: true, Value: fmt.Appendf(nil, "u%d", i)}}})
	}
	reqs = append(reqs,
		backend.ProduceRequest{Topic: "t", Records: []backend.ProduceRecord{{Partition: 1, HasPartition: true, Value: []byte("once"), IdempotencyKey: "order-1"}}},
		backend.ProduceRequest{Topic: "t", Records: []backend.ProduceRecord{{Partition: 0, HasPartition: true, Key: []byte("k"), Value: []byte("keyed")}}},
		backend.ProduceRequest{Topic: "t", Records: []backend.ProduceRecord{{Partition: 1, HasPartition: true, Value: []byte("once"), IdempotencyKey: "order-1"}}},
	)
	for i := range 5 {
		reqs = append(reqs, backend.ProduceRequest{Topic: "jobs", Records: []backend.ProduceRecord{{Value: fmt.Appendf(nil, "job-%d", i)}}})
	}
	before := n.fsm.AppliedIndex()
	queued, release := holdCoalescer(n, &n.appends, n.raft)
	outs := queueProduces(t, ctx, b, queued, reqs)
	release()
	got := make([]produceOutcome, len(outs))
	for i, ch := range outs {
		select {
		case got[i] = <-ch:
		case <-ctx.Done():
			t.Fatalf("call %d unanswered", i)
		}
	}
	for i := range 4 {
		if r := got[i]; r.err != nil || r.res.Results[0].Offset != int64(i) {
			t.Errorf("call %d: %+v, %v; want offset %d", i, r.res.Results, r.err, i)
		}
	}
	if r := got[4]; r.err != nil || r.res.Results[0].Duplicate || r.res.Results[0].Offset != 0 {
		t.Errorf("first keyed call: %+v, %v", r.res.Results, r.err)
	}
	if r := got[5]; r.err != nil || r.res.Results[0].Offset != 4 {
		t.Errorf("record with a key: %+v, %v; want offset 4", r.res.Results, r.err)
	}
	if r := got[6]; r.err != nil || !r.res.Results[0].Duplicate || r.res.Results[0].Offset != 0 || r.res.Appended != 0 {
		t.Errorf("repeated idempotency key: %+v, %v; want a duplicate of offset 0", r.res, r.err)
	}
	for i := range 5 {
		r := got[7+i]
		if i < 3 && (r.err != nil || r.res.Results[0].Offset != int64(i)) {
			t.Errorf("job %d: %+v, %v; want offset %d", i, r.res.Results, r.err, i)
		}
		if i >= 3 && !errors.Is(r.err, backend.ErrOverloaded) {
			t.Errorf("job %d past the backlog bound: %v, want ErrOverloaded", i, r.err)
		}
	}
	if vals := recordValues(t, b, "t", 0); fmt.Sprint(vals) != "[u0 u1 u2 u3 keyed]" {
		t.Errorf("partition 0: %v", vals)
	}
	if vals := recordValues(t, b, "t", 1); fmt.Sprint(vals) != "[once]" {
		t.Errorf("partition 1: %v", vals)
	}
	if vals := recordValues(t, b, "jobs", 0); fmt.Sprint(vals) != "[job-0 job-1 job-2]" {
		t.Errorf("jobs: %v", vals)
	}
	// One entry carried the 12 calls (the repeated key's call may look
	// its key up again after the entry refused it as a race, and then
	// proposes nothing).
	if d := n.fsm.AppliedIndex() - before; d > 2 {
		t.Errorf("%d entries for %d coalesced calls", d, len(reqs))
	}
}

// TestCoalescedProducesLeaderLost: calls queued when the node loses its
// leadership are refused as not led (never applied), each of them, and
// nothing they carried is written.
func TestCoalescedProducesLeaderLost(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, nodes, describe := dataGroupCluster(ctx, t, func(*Config) {})
	l := nodes[0]
	b := NewBackend(l)
	if _, err := b.CreateTopic(ctx, backend.CreateTopic{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	var reqs []backend.ProduceRequest
	for i := range 3 {
		reqs = append(reqs, backend.ProduceRequest{Topic: "t", Records: []backend.ProduceRecord{{Partition: 0, HasPartition: true, Value: fmt.Appendf(nil, "v%d", i)}}})
	}
	queued, release := holdCoalescer(l, &l.appends, l.raft)
	outs := queueProduces(t, ctx, b, queued, reqs)
	if err := l.raft.LeadershipTransfer().Error(); err != nil {
		t.Fatal(err)
	}
	release()
	for i, ch := range outs {
		select {
		case o := <-ch:
			if !errors.Is(o.err, backend.ErrNotLeader) {
				t.Errorf("call %d: %+v, %v; want ErrNotLeader", i, o.res, o.err)
			}
		case <-ctx.Done():
			t.Fatalf("call %d unanswered", i)
		}
	}
	var nl *Node
	waitFor(ctx, t, "a new leader", func() bool {
		for _, n := range nodes {
			if n != l && n.raft.State() == raft.Leader {
				nl = n
				return true
			}
		}
		return false
	}, describe)
	if err := nl.raft.Barrier(time.Minute).Error(); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if err := NewBackend(n).AwaitApplied(ctx, nl.FSM().AppliedIndex(), time.Minute); err != nil {
			t.Fatal(err)
		}
		if vals := recordValues(t, NewBackend(n), "t", 0); len(vals) != 0 {
			t.Errorf("%s holds %v from refused calls", n.NodeID(), vals)
		}
	}
}

// TestCoalesceWaitsForTheLevel: while a member's build is below the level
// that applies append-many entries, queued appends go one per entry, each
// answered, and the member applies every one.
func TestCoalesceWaitsForTheLevel(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := newJoinCluster(t)
	c.configure = func(id string, cfg *Config) {
		if id == "n2" {
			cfg.FeatureLevel = backend.FeatureLevel(fsm.CoalesceLevel - 1)
		}
	}
	l := c.open(ctx, "n1", true)
	old := c.open(ctx, "n2", false)
	if err := l.Join(ctx, joinRequest(old), c.probe); err != nil {
		t.Fatal(err)
	}
	b := NewBackend(l)
	if _, err := b.CreateTopic(ctx, backend.CreateTopic{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	var reqs []backend.ProduceRequest
	for i := range 4 {
		reqs = append(reqs, backend.ProduceRequest{Topic: "t", Records: []backend.ProduceRecord{{Partition: 0, HasPartition: true, Value: fmt.Appendf(nil, "v%d", i)}}})
	}
	before := l.fsm.AppliedIndex()
	queued, release := holdCoalescer(l, &l.appends, l.raft)
	outs := queueProduces(t, ctx, b, queued, reqs)
	release()
	for i, ch := range outs {
		if o := <-ch; o.err != nil || o.res.Results[0].Offset != int64(i) {
			t.Errorf("call %d: %+v, %v", i, o.res.Results, o.err)
		}
	}
	if d := l.fsm.AppliedIndex() - before; d != uint64(len(reqs)) {
		t.Errorf("%d entries for %d calls, want one each", d, len(reqs))
	}
	if err := NewBackend(old).AwaitApplied(ctx, l.fsm.AppliedIndex(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if vals := recordValues(t, NewBackend(old), "t", 0); fmt.Sprint(vals) != "[v0 v1 v2 v3]" {
		t.Errorf("the member of the earlier build holds %v", vals)
	}
	if err := old.fsm.Failed(); err != nil {
		t.Fatal(err)
	}
}
