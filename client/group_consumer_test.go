package client_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
)

// testClock is a clock tests move by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Unix(1_700_000_000, 0)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func produceValues(t *testing.T, c *client.Client, topic string, partition int32, values ...string) {
	t.Helper()
	recs := make([]client.Record, len(values))
	for i, v := range values {
		recs[i] = client.Record{Value: []byte(v), Partition: &partition}
	}
	if _, err := c.Produce(testContext(t), topic, recs); err != nil {
		t.Fatalf("Produce: %v", err)
	}
}

func newGroupConsumer(t *testing.T, c *client.Client, opts client.GroupConsumerOptions) *client.GroupConsumer {
	t.Helper()
	if opts.MaxWait == 0 {
		opts.MaxWait = 20 * time.Millisecond
	}
	gc, err := c.NewGroupConsumer(opts)
	if err != nil {
		t.Fatalf("NewGroupConsumer: %v", err)
	}
	t.Cleanup(func() { gc.Close(context.Background()) })
	return gc
}

// pollValues polls until n records came (or fails after 200 polls).
func pollValues(t *testing.T, gc *client.GroupConsumer, n int) []client.FetchedRecord {
	t.Helper()
	var out []client.FetchedRecord
	for i := 0; len(out) < n; i++ {
		if i == 200 {
			t.Fatalf("got %d records, want %d", len(out), n)
		}
		recs, err := gc.Poll(testContext(t))
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		out = append(out, recs...)
	}
	return out
}

func valuesOf(recs []client.FetchedRecord) []string {
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Value))
	}
	return out
}

// committedOf returns a group's committed offset in a partition as the
// server describes it; -1 if none.
func committedOf(t *testing.T, c *client.Client, group, topic string, partition int32) int64 {
	t.Helper()
	d, err := c.DescribeGroup(testContext(t), group)
	if errors.Is(err, client.ErrUnknownGroup) {
		return -1
	}
	if err != nil {
		t.Fatalf("DescribeGroup(%q): %v", group, err)
	}
	for _, p := range d.Partitions {
		if p.Topic == topic && p.Partition == partition {
			return p.Committed
		}
	}
	return -1
}

// membersOf returns a group's live members as the server describes them.
func membersOf(t *testing.T, c *client.Client, group string) []string {
	t.Helper()
	d, err := c.DescribeGroup(testContext(t), group)
	if err != nil {
		t.Fatalf("DescribeGroup(%q): %v", group, err)
	}
	var ids []string
	for _, m := range d.Members {
		ids = append(ids, m.ID)
	}
	return ids
}

// fencedCount reads the server's count of a group's fenced commits or
// fetches (logd_group_fenced_{commits,fetches}_total).
func fencedCount(t *testing.T, srv *logdtest.Server, what, group string) int {
	t.Helper()
	n, err := srv.Metric("logd_group_fenced_"+what+"_total", "group", group)
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

// Billing commits offset 2 of created, paid, shipped and resumes at
// shipped; analytics reads all three; a reset of billing to earliest
// replays them.
func TestGroupConsumerGroupsAreIndependent(t *testing.T) {
	c, _ := newTestClient(t, client.Options{})
	ctx := testContext(t)
	mustCreate(t, c, "orders", 1)
	produceValues(t, c, "orders", 0, "created", "paid", "shipped")

	billing := newGroupConsumer(t, c, client.GroupConsumerOptions{Group: "billing", Topics: []string{"orders"}, ManualCommit: true})
	if got := valuesOf(pollValues(t, billing, 3)); !slices.Equal(got, []string{"created", "paid", "shipped"}) {
		t.Fatalf("billing read %q", got)
	}
	if err := billing.CommitOffsets(ctx, map[client.TopicPartition]int64{{Topic: "orders", Partition: 0}: 2}); err != nil {
		t.Fatal(err)
	}
	if err := billing.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := committedOf(t, c, "billing", "orders", 0); got != 2 {
		t.Fatalf("billing committed %d, want 2", got)
	}

	billing2 := newGroupConsumer(t, c, client.GroupConsumerOptions{Group: "billing", Topics: []string{"orders"}, ManualCommit: true})
	if got := valuesOf(pollValues(t, billing2, 1)); !slices.Equal(got, []string{"shipped"}) {
		t.Fatalf("billing resumed with %q, want shipped", got)
	}
	analytics := newGroupConsumer(t, c, client.GroupConsumerOptions{Group: "analytics", Topics: []string{"orders"}})
	if got := valuesOf(pollValues(t, analytics, 3)); !slices.Equal(got, []string{"created", "paid", "shipped"}) {
		t.Fatalf("analytics read %q", got)
	}
	if err := billing2.Close(ctx); err != nil {
		t.Fatal(err)
	}

	plan, err := c.ResetGroupOffsets(ctx, client.ResetOffsetsRequest{Group: "billing", Topics: map[string][]int32{"orders": nil}, Strategy: client.ResetToEarliest, Execute: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Partitions) != 1 || plan.Partitions[0].Current != 2 || plan.Partitions[0].New != 0 || !plan.Executed {
		t.Fatalf("plan %+v", plan)
	}
	billing3 := newGroupConsumer(t, c, client.GroupConsumerOptions{Group: "billing", Topics: []string{"orders"}})
	if got := valuesOf(pollValues(t, billing3, 3)); !slices.Equal(got, []string{"created", "paid", "shipped"}) {
		t.Fatalf("billing after reset read %q", got)
	}
}

// Auto-commit commits what Poll returned, not what was prefetched; Close
// commits the rest and leaves.
func TestGroupConsumerAutoCommitCoversOnlyReturnedRecords(t *testing.T) {
	c, _ := newTestClient(t, client.Options{})
	mustCreate(t, c, "t", 1)
	produceValues(t, c, "t", 0, "a", "b", "c", "d")
	clock := newTestClock()
	gc := newGroupConsumer(t, c, client.GroupConsumerOptions{Group: "g", Topics: []string{"t"}, MaxRecords: 1,
		AutoCommitInterval: time.Minute, Now: clock.Now})
	if got := valuesOf(pollValues(t, gc, 1)); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("first poll %q", got)
	}
	// The next record is prefetched by now, maybe; it is not committed.
	clock.Advance(time.Minute)
	if got := valuesOf(pollValues(t, gc, 1)); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("second poll %q", got)
	}
	if got := committedOf(t, c, "g", "t", 0); got != 1 {
		t.Fatalf("committed %d after returning a (and prefetching), want 1", got)
	}
	if err := gc.Close(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if got := committedOf(t, c, "g", "t", 0); got != 2 {
		t.Fatalf("committed %d after Close, want 2 (a and b returned)", got)
	}
	if ids := membersOf(t, c, "g"); len(ids) != 0 {
		t.Fatalf("members after Close: %v", ids)
	}
}

// A second member takes half the partitions cooperatively: the first is
// told to revoke them (OnRevoked, committed, released), then the second
// gets them (OnAssigned) and continues from the committed offsets.
func TestGroupConsumerRebalanceCallbacks(t *testing.T) {
	c, _ := newTestClient(t, client.Options{})
	mustCreate(t, c, "t", 4)
	for p := range int32(4) {
		produceValues(t, c, "t", p, "x", "y")
	}
	clockA, clockB := newTestClock(), newTestClock()
	var mu sync.Mutex
	events := map[string][]string{}
	note := func(who, what string, tps []client.TopicPartition) {
		mu.Lock()
		defer mu.Unlock()
		for _, tp := range tps {
			events[who] = append(events[who], what+":"+tp.Topic+"/"+string(rune('0'+tp.Partition)))
		}
	}
	opts := func(id string, clock *testClock) client.GroupConsumerOptions {
		return client.GroupConsumerOptions{Group: "g", Topics: []string{"t"}, MemberID: id, Now: clock.Now, HeartbeatInterval: time.Second,
			OnAssigned: func(_ context.Context, tps []client.TopicPartition) { note(id, "assigned", tps) },
			OnRevoked:  func(_ context.Context, tps []client.TopicPartition) { note(id, "revoked", tps) },
		}
	}
	a := newGroupConsumer(t, c, opts("a", clockA))
	pollValues(t, a, 8)
	if got := len(a.Assignment()); got != 4 {
		t.Fatalf("a owns %d partitions, want 4", got)
	}
	b := newGroupConsumer(t, c, opts("b", clockB))
	if _, err := b.Poll(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if got := len(b.Assignment()); got != 0 {
		t.Fatalf("b owns %v before a released anything", b.Assignment())
	}
	clockA.Advance(time.Second) // a heartbeats: told to revoke two
	if _, err := a.Poll(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if got := len(a.Assignment()); got != 2 {
		t.Fatalf("a owns %v after revoking, want 2 partitions", a.Assignment())
	}
	clockB.Advance(time.Second) // b heartbeats: gets them
	if _, err := b.Poll(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if got := len(b.Assignment()); got != 2 {
		t.Fatalf("b owns %v, want 2 partitions", b.Assignment())
	}
	mu.Lock()
	revokedA, assignedB := events["a"][4:], events["b"]
	mu.Unlock()
	if len(revokedA) != 2 || len(assignedB) != 2 {
		t.Fatalf("events a %q b %q", events["a"], events["b"])
	}
	for i := range 2 {
		if revokedA[i][len("revoked:"):] != assignedB[i][len("assigned:"):] {
			t.Fatalf("a revoked %q, b assigned %q", revokedA, assignedB)
		}
	}
	// a committed the revoked partitions before releasing them: b has
	// nothing to read there.
	for _, tp := range b.Assignment() {
		if got := committedOf(t, c, "g", tp.Topic, tp.Partition); got != 2 {
			t.Fatalf("%v committed %d, want 2", tp, got)
		}
	}
	produceValues(t, c, "t", b.Assignment()[0].Partition, "z")
	if got := pollValues(t, b, 1); got[0].Offset != 2 {
		t.Fatalf("b read offset %d, want 2", got[0].Offset)
	}
}

// An executed reset fences the member: its stale fetches and commits are
// refused, the commit does not undo the reset, and the member restarts at
// the reset offset.
func TestGroupConsumerFencedByResetRejoins(t *testing.T) {
	c, srv := newTestClient(t, client.Options{})
	ctx := testContext(t)
	mustCreate(t, c, "t", 1)
	produceValues(t, c, "t", 0, "a", "b", "c")
	gc := newGroupConsumer(t, c, client.GroupConsumerOptions{Group: "g", Topics: []string{"t"}, ManualCommit: true})
	pollValues(t, gc, 3)
	gen := gc.Generation()
	if _, err := c.ResetGroupOffsets(ctx, client.ResetOffsetsRequest{Group: "g", Topics: map[string][]int32{"t": {0}},
		Strategy: client.ResetToOffset, Offset: 1, Execute: true}); err != nil {
		t.Fatal(err)
	}
	// A commit of what was read (3) is stale and refused: the reset stands.
	if err := gc.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v (fencing is handled inside)", err)
	}
	if got := fencedCount(t, srv, "commits", "g"); got != 1 {
		t.Fatalf("fenced commits %d, want 1", got)
	}
	if got := committedOf(t, c, "g", "t", 0); got != 1 {
		t.Fatalf("committed %d after a stale commit, want the reset's 1", got)
	}
	if gc.Generation() <= gen {
		t.Fatalf("generation %d, want above %d after the fenced commit's refresh", gc.Generation(), gen)
	}
	if got := valuesOf(pollValues(t, gc, 2)); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("after the reset read %q, want b c", got)
	}
}

// A reset while a prefetch is outstanding: the stale fetch is refused
// and counted, and the member restarts at the new offset.
func TestGroupConsumerFencedFetchRestarts(t *testing.T) {
	c, srv := newTestClient(t, client.Options{})
	ctx := testContext(t)
	mustCreate(t, c, "t", 1)
	produceValues(t, c, "t", 0, "a", "b")
	gc := newGroupConsumer(t, c, client.GroupConsumerOptions{Group: "g", Topics: []string{"t"}, ManualCommit: true, MaxWait: 50 * time.Millisecond})
	pollValues(t, gc, 2)
	if _, err := c.ResetGroupOffsets(ctx, client.ResetOffsetsRequest{Group: "g", Topics: map[string][]int32{"t": nil},
		Strategy: client.ResetToEarliest, Execute: true}); err != nil {
		t.Fatal(err)
	}
	// The next fetch (or long poll in flight, which ends empty) carries the
	// old generation: refused, then the member learns the reset.
	var got []string
	for i := 0; len(got) < 2; i++ {
		if i == 100 {
			t.Fatalf("read %q after the reset", got)
		}
		produceValues(t, c, "t", 0, "n")
		recs, err := gc.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Offset < 2 {
				got = append(got, string(r.Value))
			}
		}
	}
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("replayed %q", got)
	}
	if fencedCount(t, srv, "fetches", "g") == 0 {
		t.Fatal("no fenced fetch counted")
	}
}

// A member that misses its session timeout loses its partitions to
// another, which starts at the committed offset; the expired member learns
// it (OnRevoked), re-joins and gets a share again.
func TestGroupConsumerExpiredMemberRejoins(t *testing.T) {
	// The node's clock decides session expiry; it stands still unless
	// the test moves it, so a's 200 ms session ends only when it does.
	groupClock := &testClock{t: time.Now().Truncate(time.Second)}
	c, _ := newTestClientOn(t, client.Options{}, logdtest.Options{Now: groupClock.Now})
	ctx := testContext(t)
	mustCreate(t, c, "t", 2)
	produceValues(t, c, "t", 0, "a0")
	produceValues(t, c, "t", 1, "b0")
	var revoked []client.TopicPartition
	a := newGroupConsumer(t, c, client.GroupConsumerOptions{Group: "g", Topics: []string{"t"}, MemberID: "a", ManualCommit: true,
		SessionTimeout: 200 * time.Millisecond,
		OnRevoked:      func(_ context.Context, tps []client.TopicPartition) { revoked = append(revoked, tps...) }})
	pollValues(t, a, 2)
	if err := a.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	produceValues(t, c, "t", 0, "a1")
	produceValues(t, c, "t", 1, "b1")
	groupClock.Advance(time.Second) // a's session runs out
	b := newGroupConsumer(t, c, client.GroupConsumerOptions{Group: "g", Topics: []string{"t"}, MemberID: "b", ManualCommit: true})
	got := valuesOf(pollValues(t, b, 2))
	slices.Sort(got)
	if !slices.Equal(got, []string{"a1", "b1"}) {
		t.Fatalf("b read %q, want the uncommitted a1 b1", got)
	}
	// a is refused (unknown member), loses everything and re-joins.
	for i := 0; len(revoked) < 2; i++ {
		if i == 50 {
			t.Fatalf("a never learned it expired; revoked %v", revoked)
		}
		if _, err := a.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if ids := membersOf(t, c, "g"); !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("members %v, want a and b", ids)
	}
}

func TestGroupAdminCalls(t *testing.T) {
	c, _ := newTestClient(t, client.Options{})
	ctx := testContext(t)
	mustCreate(t, c, "t", 2)
	produceValues(t, c, "t", 0, "a", "b", "c")
	if _, err := c.DescribeGroup(ctx, "nope"); !errors.Is(err, client.ErrUnknownGroup) {
		t.Fatalf("describe unknown: %v", err)
	}
	gc := newGroupConsumer(t, c, client.GroupConsumerOptions{Group: "g", Topics: []string{"t"}, ManualCommit: true})
	pollValues(t, gc, 3)
	if err := gc.CommitOffsets(ctx, map[client.TopicPartition]int64{{Topic: "t", Partition: 0}: 2}); err != nil {
		t.Fatal(err)
	}
	if err := gc.CommitOffsets(ctx, map[client.TopicPartition]int64{{Topic: "t", Partition: 0}: 9}); !errors.Is(err, client.ErrOffsetOutOfRange) {
		t.Fatalf("commit above the end: %v", err)
	}
	groups, err := c.ListGroups(ctx)
	if err != nil || len(groups) != 1 || groups[0].Group != "g" || groups[0].Members != 1 || groups[0].State != "stable" {
		t.Fatalf("ListGroups = %+v, %v", groups, err)
	}
	d, err := c.DescribeGroup(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Members) != 1 || len(d.Members[0].Partitions) != 2 || len(d.Partitions) != 2 {
		t.Fatalf("describe %+v", d)
	}
	if p := d.Partitions[0]; p.Committed != 2 || p.LagRecords != 1 || p.End != 3 || p.Owner != gc.MemberID() {
		t.Fatalf("partition 0 %+v", p)
	}
	if err := c.DeleteGroup(ctx, "g"); !errors.Is(err, client.ErrGroupNotEmpty) {
		t.Fatalf("delete with a member: %v", err)
	}
	plan, err := c.ResetGroupOffsets(ctx, client.ResetOffsetsRequest{Group: "g", AllTopics: true, Strategy: client.ResetShiftBy, Shift: -5})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Executed || len(plan.Partitions) != 2 || plan.Partitions[0].New != 0 || !plan.Partitions[0].Clamped || plan.Partitions[0].Requested != -3 {
		t.Fatalf("dry-run plan %+v", plan)
	}
	if got := committedOf(t, c, "g", "t", 0); got != 2 {
		t.Fatalf("a dry run changed the offset to %d", got)
	}
	if err := gc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteGroup(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	if groups, _ := c.ListGroups(ctx); len(groups) != 0 {
		t.Fatalf("groups after delete: %+v", groups)
	}
}

// TestGroupConsumerLogsWaitWithoutPartition: with one partition, the
// member that joins while a silent member holds it is assigned nothing
// (no partition is pending for it either) and logs, at info, that it
// waits for the members holding the partitions, until when their
// sessions last.
func TestGroupConsumerLogsWaitWithoutPartition(t *testing.T) {
	c, _ := newTestClient(t, client.Options{})
	mustCreate(t, c, "t", 1)
	old := newGroupConsumer(t, c, client.GroupConsumerOptions{Group: "g", Topics: []string{"t"}, MemberID: "crashed", SessionTimeout: time.Minute})
	if _, err := old.Poll(testContext(t)); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	gc := newGroupConsumer(t, c, client.GroupConsumerOptions{Group: "g", Topics: []string{"t"}, MemberID: "restarted",
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if _, err := gc.Poll(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if a := gc.Assignment(); len(a) != 0 {
		t.Fatalf("assigned %v beside a member holding the only partition", a)
	}
	want := regexp.MustCompile(`level=INFO msg="group consumer: assigned no partition: waiting for a member holding them to leave or its session to expire" group=g member=restarted holder=crashed partitions=\[t/0\] until=\d{4}-\d\d-\d\dT`)
	if !want.MatchString(logs.String()) {
		t.Fatalf("the log lacks the wait for the crashed member:\n%s", logs.String())
	}
}

// TestGroupConsumerLogsWaitForPreviousMember: a member that joins while a
// silent member (a crashed process) holds the partitions logs, at info,
// whom it waits for and until when that member's session lasts.
func TestGroupConsumerLogsWaitForPreviousMember(t *testing.T) {
	c, _ := newTestClient(t, client.Options{})
	mustCreate(t, c, "t", 2)
	old := newGroupConsumer(t, c, client.GroupConsumerOptions{Group: "g", Topics: []string{"t"}, MemberID: "crashed", SessionTimeout: time.Minute})
	if _, err := old.Poll(testContext(t)); err != nil {
		t.Fatal(err)
	}
	// The old member polls no more, as if its process were killed.
	var logs bytes.Buffer
	gc := newGroupConsumer(t, c, client.GroupConsumerOptions{Group: "g", Topics: []string{"t"}, MemberID: "restarted",
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if _, err := gc.Poll(testContext(t)); err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`level=INFO msg="group consumer: waiting for a previous member's session to expire \(or for it to release the partitions\)" group=g member=restarted holder=crashed partitions=\[t/\d\] until=\d{4}-\d\d-\d\dT`)
	if !want.MatchString(logs.String()) {
		t.Fatalf("the log lacks the wait for the crashed member:\n%s", logs.String())
	}
}
