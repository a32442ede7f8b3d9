package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
)

// TestGroupConsumeDoesNotStopOnEmptyPoll: without --follow, consume
// --group reads up to the ends it saw at start, not up to the first poll
// that brings nothing. Here the first fetch of each partition is fenced
// (as a node that has not applied the member's join yet answers), so the
// first poll is empty although the group has lag; stopping there printed
// nothing and exited 0. A record produced after the start is not printed
// (nor committed): the next run prints it.
func TestGroupConsumeDoesNotStopOnEmptyPoll(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	runGroupSteps(t, srv, []step{
		{args: args("topic create orders -p 2")},
		{args: args("produce orders created paid --partition 0")},
		{args: args("produce orders shipped --partition 1")},
	})
	fenced := logdtest.Error(connect.CodeFailedPrecondition, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_STALE_GENERATION},
		"generation is stale")
	// The first fetch also appends a record after the end consume saw at
	// start: it is left for the next run.
	c, err := client.New(srv.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	late := int32(1)
	srv.Intercept("GroupFetch", func(ctx context.Context) error {
		if _, err := c.Produce(ctx, "orders", []client.Record{{Value: []byte("late"), Partition: &late}}); err != nil {
			return err
		}
		return fenced
	}, func(context.Context) error { return fenced })
	r := runCLI(t, srv, "", args("consume orders --group billing --output text")...)
	if r.code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	if got := slices.Sorted(slices.Values(args(r.stdout))); !slices.Equal(got, []string{"created", "paid", "shipped"}) {
		t.Fatalf("printed %q, want the 3 records the group had not consumed at start", r.stdout)
	}
	if n := srv.Calls("GroupFetch"); n < 3 {
		t.Fatalf("%d group fetches; the two fenced ones were not followed by another", n)
	}
	runGroupSteps(t, srv, []step{
		{args: args("consume orders --group billing"), stdoutExact: "late\n"},
		{args: args("consume orders --group billing"), stdoutExact: ""},
	})
}

// TestGroupConsumeSaysWhyUnassigned: without --follow, a member assigned
// no partition (the topic's one partition held by a member that has not
// left: a killed earlier run) reads nothing and exits 0, as before, but
// says on stderr that it was assigned nothing, who holds the partition
// until when, and the lag it left; with --follow, the group consumer's
// log says it waits, on stderr as logctl's diagnostics.
func TestGroupConsumeSaysWhyUnassigned(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	runGroupSteps(t, srv, []step{
		{args: args("topic create orders")},
		{args: args("produce orders created paid")},
	})
	c, err := client.New(srv.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	old, err := c.NewGroupConsumer(client.GroupConsumerOptions{Group: "billing", Topics: []string{"orders"}, MemberID: "killed", SessionTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close(context.Background())
	if _, err := old.Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	runGroupSteps(t, srv, []step{
		{args: args("consume orders --group billing"), stdoutExact: "", stderr: []string{
			`(?m)^logctl: assigned no partition of orders: member killed holds orders/0 \(its session lasts until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z unless it heartbeats\); group billing's lag of 2 records is left for the next run \(or use --follow\)$`}},
		// With --follow the member says it waits, and for whom, as it starts.
		{args: args("consume orders --group billing --follow --timeout 100ms"), stdoutExact: "", stderr: []string{
			`(?m)^logctl: msg="group consumer: assigned no partition: waiting for a member holding them to leave or its session to expire" group=billing member=\S+ holder=killed partitions=\[orders/0\] until=\d{4}-`}},
	})
}

// TestGroupConsumeResetPolicy: --reset-policy picks where a group starts
// and what happens when retention removed the records at its committed
// offset: earliest and latest skip with a warning line saying what was
// skipped, none fails and commits nothing.
func TestGroupConsumeResetPolicy(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	// Each produce call writes its own segment, so retention trims at
	// call boundaries.
	runGroupSteps(t, srv, []step{
		{args: args("topic create t --config segment.bytes=14 --config retention.bytes=1")},
		{args: args("produce t a b")},
		{args: args("consume t --group early --max 1"), stdoutExact: "a\n"},
		{args: args("consume t --group never --max 1 --reset-policy none"), wantCode: 1, stderr: []string{`no committed offset`}},
		{args: args("consume t --group strict --max 1 --reset-policy earliest"), stdoutExact: "a\n"},
		{args: args("produce t c d e")},
	})
	if err := srv.Clean(t.Context()); err != nil {
		t.Fatal(err)
	}
	runGroupSteps(t, srv, []step{
		{args: args("topic describe t -o json"), stdout: []string{`"log_start_offset": 2`}},
		{args: args("consume t --group early"), stdoutExact: "c\nd\ne\n",
			stderr: []string{`^logctl: warning: partition 0: retention removed group early's records from offset 1; skipped 1 record to offset 2 \(--reset-policy earliest\)\n$`}},
		{args: args("consume t --group strict --reset-policy none"), wantCode: 1, stderr: []string{`reset policy`}},
		{args: args("group describe strict -o json"), stdout: []string{`"committed_offset": 1,`}},
		{args: args("consume t --group strict --reset-policy latest"), stdoutExact: "",
			stderr: []string{`skipped 4 records to offset 5 \(--reset-policy latest\)`}},
		{args: args("group describe strict -o json"), stdout: []string{`"committed_offset": 5,`}},
		{args: args("consume t --group x --reset-policy sometimes"), wantCode: 2, stderr: []string{`--reset-policy "sometimes": want earliest, latest or none`}},
		{args: args("consume t --group x --from latest --reset-policy earliest"), wantCode: 2, stderr: []string{`disagree`}},
		{args: args("consume t --reset-policy none"), wantCode: 2, stderr: []string{`--reset-policy needs --group`}},
	})
}
