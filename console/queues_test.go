package console_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
)

// The queue groups pages (docs/console.md, "Queue groups"), against a
// real node; outcomes are checked through the API.

// qgStart is a node with a topic "jobs" of two partitions holding six
// records and a queue group "workers" on it, two records of which
// worker w1 holds under a one-minute lease.
func qgStart(t *testing.T) *cgEnv {
	t.Helper()
	e := cgNode(t)
	ctx, cl := e.ctx, e.cl
	if _, err := cl.CreateTopic(ctx, "jobs", 2, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateQueueGroup(ctx, "jobs", "workers", client.QueueGroupConfig{}, false); err != nil {
		t.Fatal(err)
	}
	var recs []client.Record
	for i := range 6 {
		p := int32(i % 2)
		recs = append(recs, client.Record{Value: fmt.Appendf(nil, "job-%d", i), Partition: &p})
	}
	if _, err := cl.Produce(ctx, "jobs", recs); err != nil {
		t.Fatal(err)
	}
	res, err := cl.Claim(ctx, client.ClaimRequest{Topic: "jobs", Group: "workers", MaxRecords: 2, Lease: time.Minute, Worker: "w1"})
	if err != nil || len(res.Jobs) != 2 {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	return e
}

func TestQueuesListAndGroupPage(t *testing.T) {
	e := qgStart(t)
	p := newPage(t, e.node)
	p.open("/queues")
	p.waitText("#queues-table", "workers")
	// Topic, group, state, ready, in flight, delayed, acked, dead-lettered.
	cgPoll(p, "the counts", `(() => { const c = document.querySelector('#queues-table tbody tr').cells;
		return [0, 1, 3, 4, 5, 6, 7].map(i => c[i].textContent).join('|') === 'jobs|workers|4|2|0|0|0'; })()`)
	p.waitText("#queues-table", "running")

	p.click("#queues-table tbody td:nth-child(2) a")
	p.waitText("#queue-summary", "In flight")
	cgPoll(p, "two partitions", `document.querySelectorAll('#queue-partitions tbody tr').length === 2`)
	p.waitText("#queue-settings", "jobs.workers.dlq")
	p.click("#queue-show-inflight")
	p.waitText("#queue-inflight-table", "w1")
	cgPoll(p, "two records in flight", `document.querySelectorAll('#queue-inflight-table tbody tr').length === 2`)
	var hash string
	p.eval(`location.hash`, &hash)
	if hash != "#/queues/jobs/workers?inflight=1" {
		t.Errorf("URL %q", hash)
	}
}

func TestQueuePauseStopsClaimsAndResumeRestoresThem(t *testing.T) {
	e := qgStart(t)
	p := newPage(t, e.node)
	p.open("/queues/jobs/workers")
	p.click("#queue-pause")
	p.waitText("#queue-pause-result", "Paused.")
	p.waitText("#queue-summary", "paused")
	d, err := e.cl.DescribeQueueGroup(e.ctx, "jobs", "workers")
	if err != nil || !d.Paused {
		t.Fatalf("after pause: paused %v, %v", d.Paused, err)
	}
	res, err := e.cl.Claim(e.ctx, client.ClaimRequest{Topic: "jobs", Group: "workers", MaxRecords: 4})
	if err != nil || len(res.Jobs) != 0 || !res.Paused {
		t.Fatalf("a claim of a paused group: %d jobs, paused %v, %v; want none, paused", len(res.Jobs), res.Paused, err)
	}

	p.click("#queue-resume")
	p.waitText("#queue-pause-result", "Resumed.")
	p.waitText("#queue-summary", "running")
	res, err = e.cl.Claim(e.ctx, client.ClaimRequest{Topic: "jobs", Group: "workers", MaxRecords: 4})
	if err != nil || len(res.Jobs) != 4 || res.Paused {
		t.Fatalf("a claim after resume: %d jobs, paused %v, %v; want 4", len(res.Jobs), res.Paused, err)
	}
}

func TestQueueAlterAndCreate(t *testing.T) {
	e := qgStart(t)
	p := newPage(t, e.node)
	p.open("/queues/jobs/workers")
	p.waitText("#queue-setting-maxDeliveries", "5")

	// A bad value is refused in the page and changes nothing.
	cgFill(p, "#queue-alter-leaseMs", "soon")
	p.click("#queue-alter-submit")
	p.waitText("#queue-alter-result", "not a duration")

	cgFill(p, "#queue-alter-leaseMs", "45s")
	cgFill(p, "#queue-alter-maxDeliveries", "7")
	cgFill(p, "#queue-alter-ageLimitMs", "2h")
	p.click("#queue-alter-submit")
	p.waitText("#queue-alter-result", "Changed: Lease, Max deliveries, Age limit.")
	p.waitText("#queue-setting-maxDeliveries", "7")
	d, err := e.cl.DescribeQueueGroup(e.ctx, "jobs", "workers")
	if err != nil {
		t.Fatal(err)
	}
	c := d.Config
	if c.Lease != 45*time.Second || c.MaxDeliveries != 7 || c.AgeLimit != 2*time.Hour || c.BackoffBase != time.Second || c.MaxInFlight != 1000 {
		t.Fatalf("settings after alter: %+v", c)
	}

	// Create, as logctl queue create does.
	p.open("/queues")
	p.click("#queue-create-open")
	cgFill(p, "#queue-create-topic", "jobs")
	cgFill(p, "#queue-create-group", "audit")
	cgFill(p, "#queue-create-maxDeliveries", "3")
	cgFill(p, "#queue-create-backoffMaxMs", "1m")
	p.click("#queue-create-submit")
	cgPoll(p, "the new group's page", `location.hash === '#/queues/jobs/audit' && !!document.querySelector('#queue-partitions tbody tr')`)
	d, err = e.cl.DescribeQueueGroup(e.ctx, "jobs", "audit")
	if err != nil {
		t.Fatal(err)
	}
	if d.Config.MaxDeliveries != 3 || d.Config.BackoffMax != time.Minute || d.Config.Lease != 30*time.Second {
		t.Fatalf("created with %+v", d.Config)
	}
	// A second create of the same name is refused, and the form says so.
	p.open("/queues")
	p.click("#queue-create-open")
	cgFill(p, "#queue-create-topic", "jobs")
	cgFill(p, "#queue-create-group", "audit")
	p.click("#queue-create-submit")
	p.waitText("#queue-create-result", "already_exists")
	cgTakeRefusal(p, "CreateQueueGroup")
}
