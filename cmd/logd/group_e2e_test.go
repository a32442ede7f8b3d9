package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
)

// groupClient returns a client of p, closed with the test.
func groupClient(t *testing.T, p *e2e.Node) *client.Client {
	t.Helper()
	c, err := client.New(p.Listen, client.Options{Retry: client.RetryPolicy{MaxAttempts: 20, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// pollValues polls gc until it has returned n records (or the context
// ends) and returns their values.
func pollValues(t *testing.T, ctx context.Context, gc *client.GroupConsumer, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		recs, err := gc.Poll(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("polled %v, want %d records: %v", out, n, err)
			}
			continue // retryable (e.g. the node restarting); Poll again
		}
		for _, r := range recs {
			out = append(out, string(r.Value))
		}
	}
	return out
}

// TestGroupBillingAnalytics is the guide's walk-through (docs/guide.md): two groups read
// the same topic independently; billing resumes after its commit while
// analytics reads everything; a reset of billing to earliest (with billing
// live) replays all three; offsets survive a restart of the node.
func TestGroupBillingAnalytics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := e2e.StartNode(t)
	c := groupClient(t, p)
	if _, err := c.CreateTopic(ctx, "orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	var recs []client.Record
	for _, v := range []string{"created", "paid", "shipped"} {
		recs = append(recs, client.Record{Value: []byte(v)})
	}
	if _, err := c.Produce(ctx, "orders", recs); err != nil {
		t.Fatal(err)
	}
	opts := func(group, member string) client.GroupConsumerOptions {
		return client.GroupConsumerOptions{Group: group, MemberID: member, Topics: []string{"orders"}, ManualCommit: true, SessionTimeout: 3 * time.Second, MaxWait: 200 * time.Millisecond}
	}
	billing, err := c.NewGroupConsumer(opts("billing", "billing-1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := pollValues(t, ctx, billing, 3); fmt.Sprint(got) != "[created paid shipped]" {
		t.Fatalf("billing read %v", got)
	}
	// Billing processed created and paid: commit offset 2 (next to read).
	if err := billing.CommitOffsets(ctx, map[client.TopicPartition]int64{{Topic: "orders", Partition: 0}: 2}); err != nil {
		t.Fatal(err)
	}
	if err := billing.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// A restart (the leader comes back) keeps the committed offset.
	p.Stop()
	p.Start()

	billing, err = c.NewGroupConsumer(opts("billing", "billing-2"))
	if err != nil {
		t.Fatal(err)
	}
	if got := pollValues(t, ctx, billing, 1); fmt.Sprint(got) != "[shipped]" {
		t.Fatalf("billing resumed with %v, want [shipped]", got)
	}
	analytics, err := c.NewGroupConsumer(opts("analytics", "analytics-1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := pollValues(t, ctx, analytics, 3); fmt.Sprint(got) != "[created paid shipped]" {
		t.Fatalf("analytics read %v", got)
	}
	if err := analytics.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// Dry run first: nothing changes.
	plan, err := c.ResetGroupOffsets(ctx, client.ResetOffsetsRequest{Group: "billing", Topics: map[string][]int32{"orders": nil}, Strategy: client.ResetToEarliest})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Executed || len(plan.Partitions) != 1 || plan.Partitions[0].Current != 2 || plan.Partitions[0].New != 0 || plan.Partitions[0].LagAfter != 3 {
		t.Fatalf("plan %+v", plan)
	}
	d, err := c.DescribeGroup(ctx, "billing")
	if err != nil {
		t.Fatal(err)
	}
	if d.Partitions[0].Committed != 2 || d.Partitions[0].LagRecords != 1 || d.Partitions[0].Lag <= 0 || d.State != "stable" || len(d.Members) != 1 {
		t.Fatalf("billing before reset: %+v", d)
	}
	// Execute while billing-2 is live: it is fenced and replays from 0.
	plan, err = c.ResetGroupOffsets(ctx, client.ResetOffsetsRequest{Group: "billing", Topics: map[string][]int32{"orders": nil}, Strategy: client.ResetToEarliest, Execute: true})
	if err != nil || !plan.Executed {
		t.Fatalf("execute: %+v %v", plan, err)
	}
	genBefore := billing.Generation()
	if got := pollValues(t, ctx, billing, 3); fmt.Sprint(got) != "[created paid shipped]" {
		t.Fatalf("billing after reset read %v", got)
	}
	if billing.Generation() <= genBefore {
		t.Fatalf("generation %d after reset, was %d", billing.Generation(), genBefore)
	}
	// Analytics is untouched.
	d, err = c.DescribeGroup(ctx, "analytics")
	if err != nil || d.Partitions[0].Committed != 3 || d.Partitions[0].LagRecords != 0 {
		t.Fatalf("analytics after billing's reset: %+v %v", d, err)
	}
	groups, err := c.ListGroups(ctx)
	if err != nil || len(groups) != 2 || groups[0].Group != "analytics" || groups[1].Group != "billing" {
		t.Fatalf("groups %+v %v", groups, err)
	}
	if err := c.DeleteGroup(ctx, "billing"); !errors.Is(err, client.ErrGroupNotEmpty) {
		t.Fatalf("delete of a live group: %v", err)
	}
	billing.Close(ctx)
	analytics.Close(ctx)
	if err := c.DeleteGroup(ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DescribeGroup(ctx, "billing"); !errors.Is(err, client.ErrUnknownGroup) {
		t.Fatalf("describe deleted group: %v", err)
	}
}

// TestGroupFencingAndTakeover: a stale-generation commit is refused, and a
// member that dies without leaving loses its partitions after its session
// timeout; the survivor continues exactly at the committed offsets.
func TestGroupFencingAndTakeover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := e2e.StartNode(t)
	c := groupClient(t, p)
	if _, err := c.CreateTopic(ctx, "jobs", 2, nil); err != nil {
		t.Fatal(err)
	}
	for part := int32(0); part < 2; part++ {
		var recs []client.Record
		for i := 0; i < 10; i++ {
			recs = append(recs, client.Record{Value: []byte(fmt.Sprintf("p%d-%d", part, i)), Partition: &part})
		}
		if _, err := c.Produce(ctx, "jobs", recs); err != nil {
			t.Fatal(err)
		}
	}
	opts := func(member string) client.GroupConsumerOptions {
		return client.GroupConsumerOptions{Group: "workers", MemberID: member, Topics: []string{"jobs"}, ManualCommit: true,
			SessionTimeout: time.Second, MaxWait: 100 * time.Millisecond, MaxRecords: 4}
	}
	a, _ := c.NewGroupConsumer(opts("a"))
	b, _ := c.NewGroupConsumer(opts("b"))
	if _, err := a.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(a.Assignment()); n != 2 {
		t.Fatalf("a owns %d partitions alone", n)
	}
	staleGen := a.Generation()
	// b joins; a releases one partition cooperatively on its next heartbeat.
	// What a reads meanwhile counts (under load it may drain a partition
	// before the rebalance completes).
	readByA := map[int32]int{}
	for len(b.Assignment()) == 0 || len(a.Assignment()) != 1 {
		if ctx.Err() != nil {
			t.Fatalf("no rebalance: a %v b %v", a.Assignment(), b.Assignment())
		}
		recs, _ := a.Poll(ctx)
		for _, r := range recs {
			readByA[r.Partition]++
		}
		b.Poll(ctx)
	}
	moved := b.Assignment()[0]
	kept := a.Assignment()[0]
	// a's commit for the moved partition, with its old generation, is refused.
	raw := p.RPC
	_, err := raw.CommitOffsets(ctx, connect.NewRequest(&logdv1.CommitOffsetsRequest{Group: "workers", MemberId: "a", Generation: staleGen,
		Offsets: []*logdv1.GroupOffset{{Topic: moved.Topic, Partition: moved.Partition, Offset: 9}}}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("stale commit: %v", err)
	}
	// a processes and commits 3 records of its partition, then dies
	// without leaving (it is simply never polled again).
	seen := make([]int64, readByA[kept.Partition])
	for len(seen) < 3 {
		recs, err := a.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Partition == kept.Partition {
				seen = append(seen, r.Offset)
			}
		}
	}
	if err := a.CommitOffsets(ctx, map[client.TopicPartition]int64{kept: 3}); err != nil {
		t.Fatal(err)
	}
	// b keeps polling; after a's session timeout it owns both partitions
	// and reads a's partition from offset 3: nothing skipped, nothing
	// committed read again.
	start := time.Now()
	first := map[int32]int64{}
	for len(b.Assignment()) != 2 || first[kept.Partition] == 0 {
		if ctx.Err() != nil {
			t.Fatalf("b never took over: %v", b.Assignment())
		}
		recs, err := b.Poll(ctx)
		if err != nil {
			continue
		}
		for _, r := range recs {
			if _, ok := first[r.Partition]; !ok {
				first[r.Partition] = r.Offset + 1 // +1: 0 means unseen
			}
		}
	}
	if got := first[kept.Partition] - 1; got != 3 {
		t.Fatalf("takeover read %s/%d from offset %d, want 3 (a's commit)", kept.Topic, kept.Partition, got)
	}
	if el := time.Since(start); el < 500*time.Millisecond {
		t.Fatalf("takeover after %v, before a's session could time out", el)
	}
	d, err := c.DescribeGroup(ctx, "workers")
	if err != nil || len(d.Members) != 1 || d.Members[0].ID != "b" {
		t.Fatalf("members after takeover: %+v %v", d.Members, err)
	}
	b.Close(ctx)
}
