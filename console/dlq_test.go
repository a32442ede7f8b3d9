package console_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
)

// The dead-letter pages (pages/dlq.js) against real dead letters: a queue
// group whose worker rejects records (a permanent nack: reason rejected)
// or fails their one allowed delivery (max_deliveries).

const (
	dlqTopic = "orders.workers.dlq"
	dlqXSS   = `<img src=x onerror=alert(1)>`
)

// dlqClient is a client of node, closed at the test's end.
func dlqClient(t *testing.T, node *logdtest.Server, token string) *client.Client {
	t.Helper()
	c, err := client.New(node.URL(), client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// dlqFill makes topic orders with queue group workers (one delivery
// allowed) and dead-letters values[i] under key k<i>: every record but
// the last rejected ("ledger unreachable"), the last failed once
// ("timeout", reason max_deliveries).
func dlqFill(t *testing.T, ctx context.Context, c *client.Client, values ...string) {
	t.Helper()
	if _, err := c.CreateTopic(ctx, "orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateQueueGroup(ctx, "orders", "workers", client.QueueGroupConfig{MaxDeliveries: 1}, false); err != nil {
		t.Fatal(err)
	}
	var recs []client.Record
	for i, v := range values {
		recs = append(recs, client.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(v)})
	}
	if _, err := c.Produce(ctx, "orders", recs); err != nil {
		t.Fatal(err)
	}
	claimed, err := c.Claim(ctx, client.ClaimRequest{Topic: "orders", Group: "workers", MaxRecords: len(values), Worker: "billing-1"})
	if err != nil || len(claimed.Jobs) != len(values) {
		t.Fatalf("claim: %d jobs, %v", len(claimed.Jobs), err)
	}
	var nacks []client.Nack
	for i, j := range claimed.Jobs {
		if i == len(values)-1 {
			nacks = append(nacks, client.Nack{Token: j.Token, Error: "timeout"})
		} else {
			nacks = append(nacks, client.Nack{Token: j.Token, Permanent: true, Error: "ledger unreachable"})
		}
	}
	if _, err := c.Nack(ctx, "orders", "workers", nacks...); err != nil {
		t.Fatal(err)
	}
	if end := dlqEnd(t, ctx, c, dlqTopic); end != int64(len(values)) {
		t.Fatalf("%s holds %d records, want %d", dlqTopic, end, len(values))
	}
}

// dlqEnd is a one-partition topic's end offset.
func dlqEnd(t *testing.T, ctx context.Context, c *client.Client, topic string) int64 {
	t.Helper()
	d, err := c.DescribeTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	return d.Partitions[0].End
}

// dlqValues are the values of a one-partition topic from offset from on.
func dlqValues(t *testing.T, ctx context.Context, c *client.Client, topic string, from int64) []string {
	t.Helper()
	resp, err := c.Fetch(ctx, client.FetchRequest{Topic: topic, Offset: from})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range resp.Records {
		out = append(out, string(r.Value))
	}
	return out
}

// waitRows waits until the page shows n dead-letter rows.
func (p *page) waitRows(n int) {
	p.t.Helper()
	js := fmt.Sprintf(`document.querySelectorAll('#dlq-list tbody input.dlq-pick').length === %d && !document.querySelector('#dlq-summary').textContent.startsWith('Reading')`, n)
	p.must(fmt.Sprintf("wait for %d dead letters", n), pollJS(js))
}

func TestDLQListFilterInspect(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := logdtest.Start(t, logdtest.Options{})
	c := dlqClient(t, node, "")
	dlqFill(t, ctx, c, `{"amount":-250}`, dlqXSS, "plain")

	p := newPage(t, node)
	p.open("/dlq")
	p.waitText("#dlq-topics", dlqTopic)
	p.waitText("#dlq-topics", "orders / workers")

	p.open("/dlq/" + dlqTopic)
	p.waitRows(3)
	p.waitText("#dlq-list", "ledger unreachable")
	p.waitText("#dlq-list", "max_deliveries")
	p.waitText("#dlq-list", "orders/0@1")

	// Filter by reason through the form: the URL keeps it.
	p.eval(`(() => { document.querySelector('#dlq-reason').value = 'rejected'; return true; })()`, new(bool))
	p.click(`#dlq-filter button[type=submit]`)
	p.waitRows(2)
	var hash string
	p.eval(`location.hash`, &hash)
	if !strings.Contains(hash, "reason=rejected") {
		t.Errorf("the URL does not keep the filter: %s", hash)
	}
	// By key and by time, from a shared URL.
	for _, tc := range []struct {
		query string
		rows  int
	}{
		{query: "key=k1", rows: 1},
		{query: "since=1h", rows: 3},
		{query: "until=1h", rows: 0},
		{query: "reason=max_deliveries&key=k2", rows: 1},
		{query: "from=1&to=2", rows: 1},
	} {
		p.open("/dlq/" + dlqTopic + "?" + tc.query)
		p.waitRows(tc.rows)
	}

	// Inspect: markup is shown as text and runs nothing; JSON and hex
	// views; the attempt history, one line per attempt.
	p.open("/dlq/" + dlqTopic)
	p.waitRows(3)
	p.click(`button.dlq-inspect[data-ref="0/1"]`)
	p.waitText("#dlq-value", dlqXSS)
	if n := p.count("#view img"); n != 0 {
		t.Errorf("a record's markup made %d img elements", n)
	}
	p.waitText("#dlq-history", "#1")
	p.waitText("#dlq-history", "rejected")
	p.waitText("#dlq-history", "billing-1")
	p.waitText("#dlq-history", "ledger unreachable")
	p.click(`button.dlq-inspect[data-ref="0/0"]`)
	p.click("#dlq-view-json")
	p.waitText("#dlq-value", `"amount": -250`)
	p.click("#dlq-view-hex")
	p.waitText("#dlq-value", "7b 22 61 6d")
	p.eval(`location.hash`, &hash)
	if !strings.Contains(hash, "sel=0%2F0") && !strings.Contains(hash, "sel=0/0") {
		t.Errorf("the URL does not name the inspected dead letter: %s", hash)
	}
}

// dlqStartRedrive fills the redrive form open on the page (rate 0) and
// confirms; the page then follows the job until it is done.
func dlqStartRedrive(p *page) string {
	p.t.Helper()
	p.fill("#redrive-rate", "0")
	p.click("#redrive-start")
	p.click("#redrive-confirm-ok")
	p.must("follow the job", pollJS(`location.hash.startsWith('#/dlq/jobs/rd')`))
	p.waitText("#job-state", "done")
	var hash string
	p.eval(`location.hash`, &hash)
	return strings.TrimPrefix(hash, "#/dlq/jobs/")
}

func TestDLQRedriveFiltered(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := logdtest.Start(t, logdtest.Options{})
	c := dlqClient(t, node, "")
	dlqFill(t, ctx, c, "a", "b", "c")

	p := newPage(t, node)
	p.open("/dlq/" + dlqTopic + "?reason=rejected")
	p.waitRows(2)
	p.click("#dlq-redrive-filtered")
	// Cancelled at the confirmation: nothing starts.
	p.fill("#redrive-rate", "0")
	p.click("#redrive-start")
	p.click("#redrive-confirm-cancel")
	if jobs, err := c.ListRedrives(ctx, ""); err != nil || len(jobs) != 0 {
		t.Fatalf("jobs after a cancelled confirmation: %+v, %v", jobs, err)
	}
	p.waitText("#redrive-preview", "2 selected, 2 would be redriven, 0 refused by the loop guard")
	id := dlqStartRedrive(p)
	p.waitText("#job-redriven", "2")

	j, err := c.DescribeRedrive(ctx, id)
	if err != nil || j.State != client.RedriveDone || j.Progress.Redriven != 2 || !slices.Equal(j.Options.Filter.Reasons, []string{"rejected"}) {
		t.Fatalf("job %+v, %v", j, err)
	}
	if got := dlqValues(t, ctx, c, "orders", 3); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("orders after the redrive: %q, want the two rejected records back", got)
	}
	p.open("/dlq/jobs")
	p.waitText("#redrive-jobs", id)
	p.waitText("#redrive-jobs", "done")
}

func TestDLQRedriveSelected(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := logdtest.Start(t, logdtest.Options{})
	c := dlqClient(t, node, "")
	dlqFill(t, ctx, c, "a", "b", "c", "d")

	p := newPage(t, node)
	p.open("/dlq/" + dlqTopic)
	p.waitRows(4)
	p.click(`input.dlq-pick[data-ref="0/1"]`)
	p.click(`input.dlq-pick[data-ref="0/3"]`)
	p.waitText("#dlq-redrive-selected", "Redrive selected (2)")
	p.click("#dlq-redrive-selected")
	// The form does not say it moves every dead letter above "Moves 2".
	p.waitText("#redrive-filter", "Only the selected dead letters")
	if s := p.text("#redrive-form"); strings.Contains(s, "every dead letter") {
		t.Fatalf("the redrive form of 2 selected dead letters says: %s", s)
	}
	id := dlqStartRedrive(p)

	j, err := c.DescribeRedrive(ctx, id)
	want := []client.DeadLetterRef{{Partition: 0, Offset: 1}, {Partition: 0, Offset: 3}}
	if err != nil || j.State != client.RedriveDone || j.Progress.Redriven != 2 || !slices.Equal(j.Options.Records, want) {
		t.Fatalf("job %+v, %v", j, err)
	}
	if got := dlqValues(t, ctx, c, "orders", 4); !slices.Equal(got, []string{"b", "d"}) {
		t.Fatalf("orders after the redrive: %q, want the two selected records back", got)
	}
	// The list marks the two it moved, and only them.
	p.open("/dlq/" + dlqTopic)
	p.waitRows(4)
	p.waitText(`tr:has(button[data-ref="0/1"]) .dlq-state`, "redriven by job "+id+" at ")
	p.waitText(`tr:has(button[data-ref="0/3"]) .dlq-state`, "redriven by job "+id)
	if s := p.text(`tr:has(button[data-ref="0/0"]) .dlq-state`); s != "—" {
		t.Fatalf("dead letter 0/0, not redriven, shows state %q", s)
	}
}

func TestDLQStopJob(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := logdtest.Start(t, logdtest.Options{})
	c := dlqClient(t, node, "")
	values := make([]string, 30)
	for i := range values {
		values[i] = fmt.Sprint(i)
	}
	dlqFill(t, ctx, c, values...)
	// One record a second: the job is still running when the page stops it.
	job, err := c.StartRedrive(ctx, client.RedriveOptions{DeadLetterTopic: dlqTopic, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := newPage(t, node)
	p.open("/dlq/jobs/" + job.ID)
	p.waitText("#job-state", "running")
	p.click("button.redrive-stop")
	p.click("#stop-confirm-ok")
	p.waitText("#job-state", "stopped")
	j, err := c.DescribeRedrive(ctx, job.ID)
	if err != nil || j.State != client.RedriveStopped || j.Progress.Redriven >= int64(len(values)) {
		t.Fatalf("job after stop %+v, %v", j, err)
	}
}

// TestDLQRedriveSelectedNeedsLevel9: on a node playing a build of feature
// level 8, which would ignore a job's named records, redrive selected is
// refused (failed_precondition, the level named) and starts nothing.
func TestDLQRedriveSelectedNeedsLevel9(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := logdtest.Start(t, logdtest.Options{FeatureLevel: 8})
	c := dlqClient(t, node, "")
	dlqFill(t, ctx, c, "a", "b")

	p := newPage(t, node)
	p.open("/dlq/" + dlqTopic)
	p.waitRows(2)
	p.click(`input.dlq-pick[data-ref="0/0"]`)
	p.click("#dlq-redrive-selected")
	p.fill("#redrive-rate", "0")
	p.click("#redrive-start")
	p.click("#redrive-confirm-ok")
	p.waitText("#redrive-error", "failed_precondition")
	p.waitText("#redrive-error", "feature level 9")
	p.takeRefusals("400")
	if jobs, err := c.ListRedrives(ctx, ""); err != nil || len(jobs) != 0 {
		t.Fatalf("jobs after a refused start: %+v, %v", jobs, err)
	}
	if end := dlqEnd(t, ctx, c, "orders"); end != 2 {
		t.Fatalf("orders holds %d records after a refused redrive, want 2", end)
	}
}
