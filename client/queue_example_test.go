package client_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/logd-dev/logd/client"
)

// accounts stands in for the handler's own database. In production this is
// SQLite or Postgres: the job id goes into a processed_jobs table in the
// same transaction as the balance change (docs/guide.md, "Workers in Go"), so the effect
// and the record of having done it commit together or not at all.
type accounts struct {
	mu        sync.Mutex // the "transaction"
	balance   map[string]int
	processed map[string]bool
}

// credit applies a credit once per job id, atomically with recording the id.
func (a *accounts) credit(jobID, account string, amount int) {
	a.mu.Lock() // BEGIN
	defer a.mu.Unlock()
	if a.processed[jobID] {
		return // a redelivery of a job whose effect committed: skip, then ack
	}
	a.balance[account] += amount // the effect ...
	a.processed[jobID] = true    // ... and the job id, in one transaction
} // COMMIT

// ExampleWorker shows the idempotent-handler pattern. Delivery is at least
// once: a worker killed after its effect but before its ack gets the job
// redelivered (to itself or another worker) once the lease expires. The
// handler records the job's id (topic, partition, offset) in the same
// transaction as the effect, so the redelivery changes nothing and is acked.
// A negative amount can never succeed: it is marked Permanent, so it goes to
// the dead-letter topic at once instead of being retried.
func ExampleWorker() {
	addr, stop := startExampleServer() // a real node: "127.0.0.1:7070"
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(addr, client.Options{})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "credits", 1, nil); err != nil {
		panic(err)
	}
	if _, err := c.CreateQueueGroup(ctx, "credits", "billing", client.QueueGroupConfig{}, false); err != nil {
		panic(err)
	}
	if _, err := c.Produce(ctx, "credits", []client.Record{{Value: []byte("acct-1:10")}, {Value: []byte("acct-2:-5")}}); err != nil {
		panic(err)
	}

	db := &accounts{balance: map[string]int{}, processed: map[string]bool{}}
	var handled sync.WaitGroup
	handled.Add(2)
	w, err := c.NewWorker(client.WorkerOptions{Topic: "credits", Group: "billing", Concurrency: 8},
		func(ctx context.Context, job *client.Job) error {
			defer handled.Done()
			account, amt, ok := strings.Cut(string(job.Value), ":")
			amount, err := strconv.Atoi(amt)
			if !ok || err != nil {
				return client.Permanent(fmt.Errorf("malformed job %q", job.Value))
			}
			if amount < 0 {
				return client.Permanent(errors.New("negative amount"))
			}
			jobID := fmt.Sprintf("%s/%d/%d", job.Topic, job.Partition, job.Offset)
			db.credit(jobID, account, amount)
			return nil // acked; an error here would be retried with backoff
		})
	if err != nil {
		panic(err)
	}
	runCtx, stopWorker := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }() // until its context ends
	handled.Wait()
	stopWorker()
	<-done // Run returns after acking or nacking what it handled

	fmt.Println("acct-1 balance:", db.balance["acct-1"])
	err = c.ListDeadLetters(ctx, "credits.billing.dlq", client.DeadLetterFilter{}, func(d client.DeadLetter) error {
		fmt.Printf("dead letter: %s@%d %s (%s)\n", d.OriginTopic, d.OriginOffset, d.Reason, d.LastError)
		return nil
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// acct-1 balance: 10
	// dead letter: credits@1 rejected (negative amount)
}
