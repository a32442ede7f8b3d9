package console_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
)

// The claim and settle panel of a queue group's page (docs/console.md,
// "Claim and settle"), against a real node: what the console claims,
// acks, nacks, rejects and extends is checked through the API.

// qoWorker is the worker name the console gives its claims on a node
// without authentication: "console/" and the principal.
const qoWorker = "console/User:ANONYMOUS"

// qoStart is a node with a topic "jobs" of one partition holding n
// records (key k<i>, value job-<i>) and a queue group "workers" on it
// whose backoff is short, so a nacked record comes back within a second.
func qoStart(t *testing.T, n int) (*logdtest.Server, *client.Client, context.Context) {
	t.Helper()
	node := logdtest.Start(t, logdtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cl, err := client.New(node.URL(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	if _, err := cl.CreateTopic(ctx, "jobs", 1, nil); err != nil {
		t.Fatal(err)
	}
	cfg := client.QueueGroupConfig{BackoffBase: 50 * time.Millisecond, BackoffMax: 100 * time.Millisecond}
	if _, err := cl.CreateQueueGroup(ctx, "jobs", "workers", cfg, false); err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		qoProduce(t, ctx, cl, 0, n)
	}
	return node, cl, ctx
}

// qoProduce appends job-<from> .. job-<from+n-1> with keys k<i>.
func qoProduce(t *testing.T, ctx context.Context, cl *client.Client, from, n int) {
	t.Helper()
	var recs []client.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, client.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "job-%d", i)})
	}
	if _, err := cl.Produce(ctx, "jobs", recs); err != nil {
		t.Fatal(err)
	}
}

// qoInFlight returns the group's records in flight by offset.
func qoInFlight(t *testing.T, ctx context.Context, cl *client.Client) map[int64]client.InFlightRecord {
	t.Helper()
	d, err := cl.DescribeQueueGroupInFlight(ctx, "jobs", "workers")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]client.InFlightRecord{}
	for _, r := range d.InFlight {
		out[r.Offset] = r
	}
	return out
}

// qoRow is the selector of a held record's button in the panel's table.
func qoRow(offset int, button string) string {
	return fmt.Sprintf(`#claim-table tr[data-record="0@%d"] .%s`, offset, button)
}

func qoClaim(p *page, max, lease string) {
	p.t.Helper()
	cgFill(p, "#claim-max", max)
	cgFill(p, "#claim-lease", lease)
	p.click("#claim-submit")
}

func TestQueueClaimAndSettle(t *testing.T) {
	node, cl, ctx := qoStart(t, 5)
	p := newPage(t, node)
	p.open("/queues/jobs/workers")
	p.waitText("#claim-note", "leased to this tab as a worker")
	cgPoll(p, "the worker named after the principal", fmt.Sprintf(`document.querySelector('#claim-worker').value === %q`, qoWorker))

	qoClaim(p, "5", "")
	p.waitText("#claim-outcome", "Claimed 5 record(s) as "+qoWorker)
	cgPoll(p, "five held records", `document.querySelectorAll('#claim-table tbody tr[data-record]').length === 5`)
	p.waitText(`#claim-table tr[data-record="0@1"]`, "job-1")
	var hash string
	p.eval(`location.hash`, &hash)
	if hash != "#/queues/jobs/workers" {
		t.Errorf("URL %q after a claim", hash)
	}
	inf := qoInFlight(t, ctx, cl)
	if len(inf) != 5 || inf[0].Worker != qoWorker || inf[0].Delivery != 1 {
		t.Fatalf("in flight after the console's claim: %+v", inf)
	}
	// The tokens are in the tab's memory only: not in its storage.
	var stored []string
	p.eval(`Object.keys(sessionStorage).concat(Object.keys(localStorage))
		.filter(k => !['logd.console.paused', 'logd.console.theme', 'logd.console.token'].includes(k))`, &stored)
	if len(stored) != 0 {
		t.Errorf("storage keys after a claim: %q", stored)
	}

	// Extend moves the lease (queue extend --lease 2m).
	before := inf[0].LeaseDeadline
	cgFill(p, "#claim-lease", "2m")
	p.click(qoRow(0, "claim-extend"))
	p.waitText("#claim-result", "Extend: 1 of 1 accepted")
	inf = qoInFlight(t, ctx, cl)
	if got := inf[0]; got.Extensions != 1 || !got.LeaseDeadline.After(before.Add(time.Minute)) {
		t.Fatalf("after extend: %+v; lease before %v", got, before)
	}

	// Ack.
	p.click(qoRow(0, "claim-ack"))
	p.waitText("#claim-result", "Ack: 1 of 1 accepted")
	cgPoll(p, "0@0 settled", `!document.querySelector('#claim-table tr[data-record="0@0"]')`)

	// Nack with a reason and a delay: the record comes back, delivery 2.
	p.click(qoRow(1, "claim-nack"))
	cgFill(p, "#nack-reason", "ledger timeout")
	cgFill(p, "#nack-delay", "200ms")
	p.click("#nack-ok")
	p.waitText("#claim-result", "available at")
	again, err := cl.Claim(ctx, client.ClaimRequest{Topic: "jobs", Group: "workers", MaxWait: 5 * time.Second, Worker: "api"})
	if err != nil || len(again.Jobs) != 1 || again.Jobs[0].Offset != 1 || again.Jobs[0].Delivery != 2 {
		t.Fatalf("claim after the console's nack: %+v, %v; want offset 1, delivery 2", again, err)
	}
	if _, err := cl.Ack(ctx, "jobs", "workers", again.Jobs[0].Token); err != nil {
		t.Fatal(err)
	}

	// Reject: dead-lettered as rejected, the console's worker in its history.
	p.click(qoRow(2, "claim-reject"))
	p.waitText("#nack-dialog", "dead-letters this record")
	cgFill(p, "#nack-reason", "bad input")
	p.click("#nack-ok")
	p.waitText("#claim-result", "dead-lettered")
	var dls []client.DeadLetter
	if err := cl.ListDeadLetters(ctx, "jobs.workers.dlq", client.DeadLetterFilter{}, func(d client.DeadLetter) error {
		dls = append(dls, d)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(dls) != 1 || dls[0].Reason != "rejected" || dls[0].LastError != "bad input" || dls[0].OriginOffset != 2 ||
		dls[0].History == nil || len(dls[0].History.Attempts) != 1 || dls[0].History.Attempts[0].Worker != qoWorker {
		t.Fatalf("dead letters after the console's reject: %+v", dls)
	}

	// Bulk: ack the two left, selected together.
	p.click("#claim-select-all")
	p.waitText("#claim-selected-count", "2 of 2 selected")
	p.click("#claim-ack-selected")
	p.waitText("#claim-result", "Ack: 2 of 2 accepted")
	cgPoll(p, "nothing held", `document.querySelectorAll('#claim-table tbody tr[data-record]').length === 0`)
	d, err := cl.DescribeQueueGroup(ctx, "jobs", "workers")
	if err != nil {
		t.Fatal(err)
	}
	var acked, inFlight int64
	for _, pt := range d.Partitions {
		acked += pt.Acked
		inFlight += pt.InFlight
	}
	if acked != 4 || inFlight != 0 {
		t.Fatalf("acked %d, in flight %d; want 4, 0", acked, inFlight)
	}
}

func TestQueueClaimExpiredLeaseAckRefused(t *testing.T) {
	node, cl, ctx := qoStart(t, 1)
	p := newPage(t, node)
	p.open("/queues/jobs/workers")
	cgPoll(p, "the worker", `document.querySelector('#claim-worker').value !== ''`)
	qoClaim(p, "1", "1s")
	p.waitText("#claim-outcome", "Claimed 1 record(s)")
	p.waitText(`#claim-table tr[data-record="0@0"]`, "lease ended")
	// Another worker claims it meanwhile: the tab's token is stale.
	again, err := cl.Claim(ctx, client.ClaimRequest{Topic: "jobs", Group: "workers", Worker: "api"})
	if err != nil || len(again.Jobs) != 1 || again.Jobs[0].Delivery != 2 {
		t.Fatalf("claim after the lease ended: %+v, %v", again, err)
	}
	p.click(qoRow(0, "claim-ack"))
	p.waitText("#claim-result", "stale")
	p.waitText("#claim-result", "failed_precondition")
	p.waitText("#claim-result", "token of 0@0: delivery 1 was superseded by delivery 2") // the record, not its token
	p.waitText(`#claim-table tr[data-record="0@0"]`, "refused: stale_token")
	cgTakeRefusal(p, "Ack")
	// The other worker's delivery is untouched.
	inf := qoInFlight(t, ctx, cl)
	if r, ok := inf[0]; !ok || r.Worker != "api" || r.Delivery != 2 {
		t.Fatalf("in flight after the refused ack: %+v", inf)
	}
	p.click(qoRow(0, "claim-forget"))
	cgPoll(p, "the stale record forgotten", `document.querySelectorAll('#claim-table tbody tr[data-record]').length === 0`)
}

// The records page's produce form with --key and --idempotency-key, as the
// guide's backpressure walk-through (docs/guide.md) produces: a repeat within the
// topic's idempotency window appends nothing and says so.
func TestRecordsProduceIdempotencyKey(t *testing.T) {
	node, cl, ctx := qoStart(t, 0)
	p := newPage(t, node)
	p.open("/topics/jobs/records")
	p.waitText("#records-range", "No records")
	for i, want := range []string{"Appended at partition 0, offset 0.", "Duplicate: "} {
		cgFill(p, "#produce-key", "k4")
		cgFill(p, "#produce-value", "job-4")
		cgFill(p, "#produce-idempotency-key", "job-4")
		p.click("#produce-submit")
		p.waitText("#produce-result", want)
		if i == 0 {
			p.waitText("#records-list", "job-4")
		}
	}
	// Several records, one a line: keys KEY-1, KEY-2; a repeat appends nothing.
	p.click("#produce-lines")
	for i, want := range []string{"Appended 2 record(s).", "Appended 0 record(s); 2 duplicate(s)"} {
		cgFill(p, "#produce-value", "job-5\njob-6")
		cgFill(p, "#produce-idempotency-key", "import")
		p.click("#produce-submit")
		p.waitText("#produce-result", want)
		if i == 0 {
			// The list re-reads after the result shows; until it has, the
			// form may move under the next click (chromedp clicks at the
			// button's coordinates).
			p.waitText("#records-list", "job-6")
		}
	}
	f, err := cl.Fetch(ctx, client.FetchRequest{Topic: "jobs", Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range f.Records {
		got = append(got, string(r.Key)+"="+string(r.Value))
	}
	if fmt.Sprint(got) != "[k4=job-4 k4=job-5 k4=job-6]" {
		t.Fatalf("jobs holds %v", got)
	}
}
