package inbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/inbox"
	"github.com/logd-dev/logd/logdtest"
)

// produceTwice appends n payments carrying their id in HeaderID, then
// the first three again (as a redrive or a second relay would): n+3
// records, n ids.
func produceTwice(t *testing.T, c *client.Client, topic string, n int) {
	t.Helper()
	ctx := testContext(t)
	var recs []client.Record
	for i := range n {
		recs = append(recs, client.Record{Key: []byte(fmt.Sprintf("a%d", i%3)), Value: []byte("5"),
			Headers: []client.Header{{Key: inbox.HeaderID, Value: fmt.Appendf(nil, "pay-%d", i)}}})
	}
	recs = append(recs, recs[:3]...)
	if _, err := c.Produce(ctx, topic, recs); err != nil {
		t.Fatal(err)
	}
}

func checkPaidOnce(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	var rows, distinct int
	if err := db.QueryRowContext(testContext(t), "SELECT COUNT(*), COUNT(DISTINCT msg) FROM payments").Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != n || distinct != n {
		t.Fatalf("%d payment rows, %d distinct; want %d of each", rows, distinct, n)
	}
}

func waitCount(t *testing.T, what string, c *atomic.Int64, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for c.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %d of %d", what, c.Load(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWorkerHandler: a queue worker through the inbox applies each id
// once though its records are delivered n+3 times, and acks them all.
func TestWorkerHandler(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	c, err := client.New(srv.URL(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testContext(t)
	if _, err := c.CreateTopic(ctx, "pay", 2, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateQueueGroup(ctx, "pay", "billing", client.QueueGroupConfig{}, false); err != nil {
		t.Fatal(err)
	}
	produceTwice(t, c, "pay", 10)
	db := ledger(t, backends()[0])
	ib, _ := inbox.New(inbox.Options{})
	h := ib.WorkerHandler(db, inbox.IDFrom{}, func(ctx context.Context, tx *sql.Tx, job *client.Job) error {
		return pay(ctx, tx, string(job.Headers[0].Value), string(job.Key), 5)
	})
	var done atomic.Int64
	w, err := c.NewWorker(client.WorkerOptions{Topic: "pay", Group: "billing", Concurrency: 4, MaxWait: 50 * time.Millisecond}, func(ctx context.Context, job *client.Job) error {
		err := h(ctx, job)
		if err == nil {
			done.Add(1)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	werr := make(chan error, 1)
	go func() { werr <- w.Run(wctx) }()
	waitCount(t, "13 handled jobs", &done, 13)
	cancel()
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	checkPaidOnce(t, db, 10)
}

// TestProcessRecord: a group consumer through the inbox, committing its
// offsets after processing, applies each id once.
func TestProcessRecord(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	c, err := client.New(srv.URL(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testContext(t)
	if _, err := c.CreateTopic(ctx, "pay", 2, nil); err != nil {
		t.Fatal(err)
	}
	produceTwice(t, c, "pay", 10)
	db := ledger(t, backends()[0])
	ib, _ := inbox.New(inbox.Options{})
	gc, err := c.NewGroupConsumer(client.GroupConsumerOptions{Group: "billing", Topics: []string{"pay"}, ManualCommit: true, ResetPolicy: "earliest", MaxWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close(context.Background())
	seen, applied := 0, 0
	deadline := time.Now().Add(30 * time.Second)
	for seen < 13 && time.Now().Before(deadline) {
		recs, err := gc.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			ok, err := ib.ProcessRecord(ctx, db, inbox.IDFrom{}, r, func(tx *sql.Tx) error {
				return pay(ctx, tx, string(r.Headers[0].Value), string(r.Key), 5)
			})
			if err != nil {
				t.Fatal(err)
			}
			seen++
			if ok {
				applied++
			}
		}
		if err := gc.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if seen != 13 || applied != 10 {
		t.Fatalf("%d records seen, %d applied; want 13 and 10", seen, applied)
	}
	checkPaidOnce(t, db, 10)
}
