package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
)

// TestQueueRetentionKeepsUnfinished runs the leader's cleaner in a real
// process over a topic whose retention.ms is 1 and whose queue group has
// left some records unfinished (in flight, and one nacked with a long
// delay) while the rest are acked. Over many cleaner passes the log start
// never passes the first unfinished offset; the unfinished records are
// still claimable with their values and delivery counts; once they are
// acked, retention deletes every closed segment.
func TestQueueRetentionKeepsUnfinished(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := e2e.StartNode(t, "--cleaner-interval", "50ms")
	c := newQueueClient(t, p)
	// Small segments: a few records each, so the cleaner has segments
	// below, around and above the unfinished records to choose from.
	if _, err := c.CreateTopic(ctx, "jobs", 1, map[string]string{"segment.bytes": "1024", "retention.ms": "3600000"}); err != nil {
		t.Fatal(err)
	}
	const n = 40
	part := int32(0)
	for i := range n {
		v := fmt.Sprintf("%03d-%s", i, strings.Repeat("x", 200))
		if _, err := c.Produce(ctx, "jobs", []client.Record{{Value: []byte(v), Partition: &part}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CreateQueueGroup(ctx, "jobs", "w", client.QueueGroupConfig{Lease: time.Hour}, false); err != nil {
		t.Fatal(err)
	}
	res, err := c.Claim(ctx, client.ClaimRequest{Topic: "jobs", Group: "w", MaxRecords: n})
	if err != nil || len(res.Jobs) != n {
		t.Fatalf("claim: %d jobs, %v", len(res.Jobs), err)
	}
	// Offsets 12..15 stay in flight and 20 is nacked with a delay (it is
	// ready again later, but never claimed until the end); every other
	// record is acked, so the group's done offset is 12.
	const firstUnfinished = 12
	unfinished := []int64{12, 13, 14, 15, 20}
	var acks []string
	tokens := map[int64]string{}
	for _, j := range res.Jobs {
		tokens[j.Offset] = j.Token
		if !slices.Contains(unfinished, j.Offset) {
			acks = append(acks, j.Token)
		}
	}
	if _, err := c.Ack(ctx, "jobs", "w", acks...); err != nil {
		t.Fatal(err)
	}
	delay := 2 * time.Second
	if _, err := c.Nack(ctx, "jobs", "w", client.Nack{Token: tokens[20], Error: "downstream down", Delay: &delay}); err != nil {
		t.Fatal(err)
	}
	d, err := c.DescribeQueueGroup(ctx, "jobs", "w")
	if err != nil {
		t.Fatal(err)
	}
	if qp := d.Partitions[0]; qp.DoneOffset != firstUnfinished || qp.InFlight != 4 || qp.Delayed != 1 {
		t.Fatalf("queue state before retention: %+v", qp)
	}

	describe := func() client.PartitionInfo {
		t.Helper()
		d, err := c.DescribeTopic(ctx, "jobs")
		if err != nil {
			t.Fatal(err)
		}
		return d.Partitions[0]
	}
	before := describe()
	if before.LogStart != 0 || before.Segments < 8 {
		t.Fatalf("before the alter: %+v", before)
	}
	passes := func() float64 { return scrape(t, "http://"+p.Listen+"/metrics")["logd_cleaner_passes_total"] }
	if _, err := c.AlterTopic(ctx, "jobs", map[string]string{"retention.ms": "1"}, nil); err != nil {
		t.Fatal(err)
	}
	// The segments wholly below the done offset go...
	e2e.WaitFor(t, ctx, "retention deletes finished segments", func() bool {
		pi := describe()
		if pi.LogStart > firstUnfinished {
			t.Fatalf("log start %d passed the first unfinished offset %d", pi.LogStart, firstUnfinished)
		}
		return pi.LogStart > 0
	})
	// ...and over many more passes nothing unfinished does.
	start := passes()
	e2e.WaitFor(t, ctx, "ten more cleaner passes", func() bool {
		if pi := describe(); pi.LogStart > firstUnfinished || pi.LogStart == 0 {
			t.Fatalf("log start %d (first unfinished offset %d)", pi.LogStart, firstUnfinished)
		}
		return passes() >= start+10
	})
	kept := describe()
	t.Logf("after %v cleaner passes: log start %d, %d segments (was %d)", passes(), kept.LogStart, kept.Segments, before.Segments)

	// The unfinished records are still there and claimable: the
	// in-flight ones come back at once after a nack with no delay.
	zero := time.Duration(0)
	var nacks []client.Nack
	for _, o := range unfinished[:4] {
		nacks = append(nacks, client.Nack{Token: tokens[o], Error: "worker restarted", Delay: &zero})
	}
	if _, err := c.Nack(ctx, "jobs", "w", nacks...); err != nil {
		t.Fatal(err)
	}
	res, err = c.Claim(ctx, client.ClaimRequest{Topic: "jobs", Group: "w", MaxRecords: n})
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, j := range res.Jobs {
		got = append(got, j.Offset)
		if want := fmt.Sprintf("%03d-", j.Offset); !strings.HasPrefix(string(j.Value), want) || j.Delivery != 2 {
			t.Fatalf("reclaimed offset %d: value %.8q, delivery %d", j.Offset, j.Value, j.Delivery)
		}
		tokens[j.Offset] = j.Token
	}
	// Record 20 may be ready again by now (its delay is short); it is
	// claimed last, below.
	if i := slices.Index(got, 20); i >= 0 {
		got = slices.Delete(got, i, i+1)
	}
	if !slices.Equal(got, unfinished[:4]) {
		t.Fatalf("reclaimed offsets %v, want %v", got, unfinished[:4])
	}
	// The delayed record is readable too.
	fr, err := c.Fetch(ctx, client.FetchRequest{Topic: "jobs", Offset: 20})
	if err != nil || len(fr.Records) == 0 || !strings.HasPrefix(string(fr.Records[0].Value), "020-") {
		t.Fatalf("fetch of the delayed record: %v", err)
	}

	// Ack the reclaimed ones (and 20 if it came back with them).
	var last []string
	for _, j := range res.Jobs {
		last = append(last, j.Token)
	}
	if _, err := c.Ack(ctx, "jobs", "w", last...); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(res.Jobs, func(j client.Job) bool { return j.Offset == 20 }) {
		// Still protected: offset 20 is unfinished.
		mid := passes()
		e2e.WaitFor(t, ctx, "five cleaner passes with a record unfinished", func() bool {
			pi := describe()
			if pi.LogStart > 20 {
				t.Fatalf("log start %d passed the unfinished record 20", pi.LogStart)
			}
			return passes() >= mid+5 && pi.LogStart > firstUnfinished
		})
		r, err := c.Claim(ctx, client.ClaimRequest{Topic: "jobs", Group: "w", MaxRecords: 1, MaxWait: 10 * time.Second})
		if err != nil || len(r.Jobs) != 1 || r.Jobs[0].Offset != 20 || r.Jobs[0].Delivery != 2 {
			t.Fatalf("claim of the delayed record: %+v %v", r, err)
		}
		if _, err := c.Ack(ctx, "jobs", "w", r.Jobs[0].Token); err != nil {
			t.Fatal(err)
		}
	}

	e2e.WaitFor(t, ctx, "retention after everything finished", func() bool {
		pi := describe()
		return pi.Segments == 1 && pi.LogStart > 20
	})
	after := describe()
	if after.End != n {
		t.Fatalf("after everything finished: %+v", after)
	}
	d, err = c.DescribeQueueGroup(ctx, "jobs", "w")
	if err != nil {
		t.Fatal(err)
	}
	if qp := d.Partitions[0]; qp.DoneOffset != n || qp.InFlight != 0 || qp.Delayed != 0 {
		t.Fatalf("queue state after everything finished: %+v", qp)
	}
	t.Logf("all finished: log start %d, %d segment", after.LogStart, after.Segments)
}
