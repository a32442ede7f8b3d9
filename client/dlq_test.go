package client_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
)

func TestDeadLetterParseAndFilter(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	rec := client.FetchedRecord{Topic: "jobs.w.dlq", Offset: 7, Key: []byte("k1"), Value: []byte("v"), Headers: []client.Header{
		{Key: "job", Value: []byte("x")},
		{Key: client.RedriveCountHeader, Value: []byte("2")},
		{Key: client.DLQHeaderReason, Value: []byte("max_deliveries")},
		{Key: client.DLQHeaderOriginTopic, Value: []byte("jobs")},
		{Key: client.DLQHeaderOriginPart, Value: []byte("1")},
		{Key: client.DLQHeaderOriginOffset, Value: []byte("42")},
		{Key: client.DLQHeaderDeliveries, Value: []byte("5")},
		{Key: client.DLQHeaderTime, Value: []byte(at.Format(time.RFC3339Nano))},
	}}
	d, ok := client.ParseDeadLetter(rec)
	if !ok || d.Reason != "max_deliveries" || d.OriginPartition != 1 || d.OriginOffset != 42 || d.Deliveries != 5 || d.Redrives != 2 ||
		!d.DeadLettered.Equal(at) || len(d.Headers) != 2 {
		t.Fatalf("parsed %+v ok=%v", d, ok)
	}
	if _, ok := client.ParseDeadLetter(client.FetchedRecord{Value: []byte("plain")}); ok {
		t.Fatal("a record without dead-letter headers parsed")
	}
	for _, tc := range []struct {
		name string
		f    client.DeadLetterFilter
		want bool
	}{
		{name: "all", want: true},
		{name: "reason", f: client.DeadLetterFilter{Reasons: []string{"rejected", "max_deliveries"}}, want: true},
		{name: "other reason", f: client.DeadLetterFilter{Reasons: []string{"rejected"}}},
		{name: "since, inclusive", f: client.DeadLetterFilter{Since: at}, want: true},
		{name: "until, exclusive", f: client.DeadLetterFilter{Until: at}},
		{name: "key", f: client.DeadLetterFilter{Key: "k1"}, want: true},
		{name: "other key", f: client.DeadLetterFilter{Key: "k2"}},
	} {
		if got := tc.f.Match(d); got != tc.want {
			t.Errorf("%s: Match = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRedriveKeepsHistory: a dead letter lists each attempt with its
// worker; a redrive carries the history back, and the record's next dead
// letter appends the new attempt (marked with its redrive count).
func TestRedriveKeepsHistory(t *testing.T) {
	c, _ := newTestClient(t, client.Options{})
	ctx := testContext(t)
	mustCreate(t, c, "jobs", 1)
	if _, err := c.CreateQueueGroup(ctx, "jobs", "w", client.QueueGroupConfig{}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Produce(ctx, "jobs", []client.Record{{Key: []byte("k"), Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	reject := func(worker, msg string) {
		t.Helper()
		res, err := c.Claim(ctx, client.ClaimRequest{Topic: "jobs", Group: "w", Worker: worker, MaxWait: 5 * time.Second})
		if err != nil || len(res.Jobs) != 1 {
			t.Fatalf("claim: %+v, %v", res, err)
		}
		if _, err := c.Nack(ctx, "jobs", "w", client.Nack{Token: res.Jobs[0].Token, Permanent: true, Error: msg}); err != nil {
			t.Fatal(err)
		}
	}
	list := func() []client.DeadLetter {
		t.Helper()
		var out []client.DeadLetter
		if err := c.ListDeadLetters(ctx, "jobs.w.dlq", client.DeadLetterFilter{}, func(d client.DeadLetter) error { out = append(out, d); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	reject("w1", "bad input")
	job, err := c.StartRedrive(ctx, client.RedriveOptions{DeadLetterTopic: "jobs.w.dlq"})
	if err != nil {
		t.Fatal(err)
	}
	if j, err := c.WaitRedrive(ctx, job.ID, 10*time.Millisecond, nil); err != nil || j.State != client.RedriveDone || j.Progress.Redriven != 1 {
		t.Fatalf("redrive: %+v, %v", j, err)
	}
	reject("w2", "still bad")
	dls := list()
	if len(dls) != 2 || dls[1].History == nil {
		t.Fatalf("dead letters %+v", dls)
	}
	var got []string
	for _, a := range dls[1].History.Attempts {
		got = append(got, fmt.Sprintf("%s/%s/%s/redrive-%d", a.Worker, a.Outcome, a.Error, a.Redrive))
	}
	if want := "w1/rejected/bad input/redrive-0 w2/rejected/still bad/redrive-1"; strings.Join(got, " ") != want {
		t.Fatalf("history %q, want %q", strings.Join(got, " "), want)
	}
}

// TestRedriveJobsThroughTheAPI: bad input is a typed error and starts
// nothing; a job is listed, described and stopped; internal groups are
// listed only when asked for.
func TestRedriveJobsThroughTheAPI(t *testing.T) {
	c, _ := newTestClient(t, client.Options{})
	ctx := testContext(t)
	mustCreate(t, c, "jobs", 1)
	mustCreate(t, c, "jobs.dlq", 1)
	for _, tc := range []struct {
		name string
		o    client.RedriveOptions
		err  error
	}{
		{name: "unknown dead-letter topic", o: client.RedriveOptions{DeadLetterTopic: "nope"}, err: client.ErrUnknownTopic},
		{name: "unknown target", o: client.RedriveOptions{DeadLetterTopic: "jobs.dlq", Target: "nope"}, err: client.ErrUnknownTopic},
		{name: "negative rate", o: client.RedriveOptions{DeadLetterTopic: "jobs.dlq", Rate: -1}, err: client.ErrInvalidArgument},
		{name: "empty offsets", o: client.RedriveOptions{DeadLetterTopic: "jobs.dlq", FromOffset: 3, ToOffset: 2}, err: client.ErrInvalidArgument},
		{name: "bad name", o: client.RedriveOptions{DeadLetterTopic: "a b"}, err: client.ErrInvalidArgument},
	} {
		if _, err := c.StartRedrive(ctx, tc.o); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
	if jobs, err := c.ListRedrives(ctx, ""); err != nil || len(jobs) != 0 {
		t.Fatalf("jobs after refusals: %+v, %v", jobs, err)
	}
	for _, f := range []func() error{
		func() error { _, err := c.DescribeRedrive(ctx, "rd12345"); return err },
		func() error { _, err := c.StopRedrive(ctx, "rd12345"); return err },
	} {
		if err := f(); !errors.Is(err, client.ErrUnknownRedrive) {
			t.Errorf("stale id: %v, want ErrUnknownRedrive", err)
		}
	}
	// Plain records (no dead-letter headers) are skipped: no origin.
	if _, err := c.Produce(ctx, "jobs.dlq", []client.Record{{Value: []byte("x")}, {Value: []byte("y")}}); err != nil {
		t.Fatal(err)
	}
	job, err := c.StartRedrive(ctx, client.RedriveOptions{DeadLetterTopic: "jobs.dlq", Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	if job.Total != 2 || job.State != client.RedriveRunning || job.PositionGroup != "logd-redrive."+job.ID {
		t.Fatalf("started %+v", job)
	}
	j, err := c.WaitRedrive(ctx, job.ID, 10*time.Millisecond, nil)
	if err != nil || j.State != client.RedriveDone || j.Progress.Scanned != 2 || j.Progress.Skipped != 2 {
		t.Fatalf("job %+v, %v", j, err)
	}
	if s, err := c.StopRedrive(ctx, job.ID); err != nil || s.State != client.RedriveDone {
		t.Fatalf("stop of a done job: %+v, %v", s, err)
	}
	if jobs, err := c.ListRedrives(ctx, "jobs.dlq"); err != nil || len(jobs) != 1 || jobs[0].ID != job.ID {
		t.Fatalf("list: %+v, %v", jobs, err)
	}
	if jobs, err := c.ListRedrives(ctx, "jobs"); err != nil || len(jobs) != 0 {
		t.Fatalf("list of another topic: %+v, %v", jobs, err)
	}
	has := func(gs []client.GroupSummary) bool {
		for _, g := range gs {
			if g.Group == job.PositionGroup {
				return true
			}
		}
		return false
	}
	if gs, err := c.ListGroups(ctx); err != nil || has(gs) {
		t.Fatalf("ListGroups shows the position: %+v, %v", gs, err)
	}
	if gs, err := c.ListGroupsWith(ctx, client.ListGroupsOptions{All: true}); err != nil || !has(gs) {
		t.Fatalf("ListGroups All misses the position: %+v, %v", gs, err)
	}
}
