package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/logd-dev/logd/client"
)

// demoLease is the lease of the queue stories: short, so expiries happen
// within the demo.
const demoLease = 500 * time.Millisecond

// storyCredit: one job "credit acct-7 with 10". Worker 1 applies it and
// crashes before acking; after the lease expires logd redelivers it to
// worker 2, which applies it and acks. Two queue groups on the same topic
// run the story side by side: one with a handler that just credits, one
// with a handler that records the job id in the same commit as the credit.
func storyCredit(ctx context.Context, d *demo) error {
	if _, err := d.c.CreateTopic(ctx, "credits", 1, nil); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "logd-demo-ledgers-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	d.say("(each ledger is an SQLite database; the idempotent handler records the job id through package inbox, in the credit's transaction)")

	type handler struct {
		group  string
		ledger *ledger
		apply  func(l *ledger, job client.Job, account string, amount int) (string, error)
	}
	handlers := []handler{
		{"unsafe", newLedger(dir, "unsafe"), func(l *ledger, _ client.Job, account string, amount int) (string, error) {
			return "credited", l.creditUnsafe(account, amount)
		}},
		{"idempotent", newLedger(dir, "idempotent"), func(l *ledger, job client.Job, account string, amount int) (string, error) {
			id := fmt.Sprintf("%s/%d/%d", job.Topic, job.Partition, job.Offset)
			applied, err := l.creditOnce(id, account, amount)
			if !applied {
				return "job " + id + " already applied: skipped", err
			}
			return "credited, job " + id + " recorded in the same commit", err
		}},
	}
	for _, h := range handlers {
		if _, err := d.c.CreateQueueGroup(ctx, "credits", h.group, client.QueueGroupConfig{Lease: demoLease}, false); err != nil {
			return err
		}
	}
	if _, err := d.c.Produce(ctx, "credits", []client.Record{{Key: []byte("job-1"), Value: []byte("acct-7:10")}}); err != nil {
		return err
	}
	d.say("produced job-1: credit acct-7 with 10")

	for _, h := range handlers {
		work := func(worker string) (client.Job, error) {
			job, err := claimOne(ctx, d.c, "credits", h.group, 5*time.Second)
			if err != nil {
				return job, err
			}
			account, amt, _ := strings.Cut(string(job.Value), ":")
			amount, err := strconv.Atoi(amt)
			if err != nil {
				return job, err
			}
			what, err := h.apply(h.ledger, job, account, amount)
			d.say("[%s] %s got delivery %d of job-1: %s", h.group, worker, job.Delivery, what)
			return job, err
		}
		if _, err := work("worker 1"); err != nil {
			return err
		}
		d.say("[%s] worker 1 crashes before its ack; the lease (%v) runs out", h.group, demoLease)
		job, err := work("worker 2")
		if err != nil {
			return err
		}
		if _, err := d.c.Ack(ctx, "credits", h.group, job.Token); err != nil {
			return err
		}
		d.say("[%s] worker 2 acked", h.group)
	}
	unsafe, err := handlers[0].ledger.balance("acct-7")
	if err != nil {
		return err
	}
	safe, err := handlers[1].ledger.balance("acct-7")
	if err != nil {
		return err
	}
	d.check(unsafe == 20, "the unsafe handler credited twice: acct-7 = %d", unsafe)
	d.check(safe == 10, "the idempotent handler credited once: acct-7 = %d", safe)
	return nil
}

// claimOne claims a single job, polling until one is available or wait
// passes.
func claimOne(ctx context.Context, c *client.Client, topic, group string, wait time.Duration) (client.Job, error) {
	deadline := time.Now().Add(wait)
	for {
		res, err := c.Claim(ctx, client.ClaimRequest{Topic: topic, Group: group, MaxRecords: 1, MaxWait: 200 * time.Millisecond})
		if err != nil {
			return client.Job{}, err
		}
		if len(res.Jobs) == 1 {
			return res.Jobs[0], nil
		}
		if time.Now().After(deadline) {
			return client.Job{}, fmt.Errorf("no job of %s/%s within %v", topic, group, wait)
		}
	}
}
