package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/inbox"
	"github.com/logd-dev/logd/outbox"
)

// errKilled stands for a worker killed after its commit, before its ack.
var errKilled = errors.New("killed after the commit, before the ack")

// openSQLite opens an SQLite database file with a busy timeout and WAL.
func openSQLite(path string) (*sql.DB, error) {
	return sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
}

func execAll(ctx context.Context, db *sql.DB, stmts []string) error {
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// storyOutbox: an order service writes each order and its event in one
// SQLite transaction (package outbox); relays are killed at random
// moments (before, during and after appends, before their deletes); a
// billing worker applies each payment through an inbox (package inbox) and
// is killed after its commit, before its ack, now and then. At the end
// every order's event is in the topic exactly once and every payment is
// applied exactly once.
func storyOutbox(ctx context.Context, d *demo) error {
	const orders = 60
	if _, err := d.c.CreateTopic(ctx, "order-events", 3, nil); err != nil {
		return err
	}
	if _, err := d.c.CreateQueueGroup(ctx, "order-events", "billing", client.QueueGroupConfig{BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond, MaxDeliveries: 50}, false); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "logd-demo-outbox-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	shop, err := openSQLite(filepath.Join(dir, "orders.db"))
	if err != nil {
		return err
	}
	defer shop.Close()
	billing, err := openSQLite(filepath.Join(dir, "billing.db"))
	if err != nil {
		return err
	}
	defer billing.Close()
	obDDL, _ := outbox.SQLiteSchema(outbox.DefaultTable)
	ibDDL, _ := inbox.SQLiteSchema(inbox.DefaultTable)
	if err := execAll(ctx, shop, append(obDDL, "CREATE TABLE orders (id TEXT PRIMARY KEY, customer TEXT NOT NULL, amount INTEGER NOT NULL)")); err != nil {
		return err
	}
	if err := execAll(ctx, billing, append(ibDDL, "CREATE TABLE payments (order_id TEXT NOT NULL, customer TEXT NOT NULL, amount INTEGER NOT NULL)")); err != nil {
		return err
	}
	ob, _ := outbox.New(outbox.Options{})
	ib, _ := inbox.New(inbox.Options{})

	// The order service: each order and its event commit together.
	total := 0
	ids := map[string]bool{}
	for i := range orders {
		customer, amount := fmt.Sprintf("c%d", i%5), 1+rand.IntN(100)
		tx, err := shop.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		order := fmt.Sprintf("order-%03d", i)
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, customer, amount) VALUES ($1, $2, $3)", order, customer, amount); err != nil {
			tx.Rollback()
			return err
		}
		id, err := ob.Write(ctx, tx, outbox.Message{Topic: "order-events", Key: []byte(customer), Value: fmt.Appendf(nil, "%s %s %d", order, customer, amount)})
		if err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		ids[id] = true
		total += amount
	}
	d.say("the order service committed %d orders, each with its event in the outbox table, in one SQLite transaction", orders)

	// Relays killed at random moments until the outbox is empty.
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	kills := 0
	deadline := time.Now().Add(30 * time.Second)
	for {
		var pending int
		if err := shop.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+outbox.DefaultTable).Scan(&pending); err != nil {
			return err
		}
		if pending == 0 || time.Now().After(deadline) {
			break
		}
		r, err := ob.NewRelay(outbox.RelayOptions{Client: d.c, DB: shop, BatchSize: 1 + rand.IntN(8), PollInterval: 5 * time.Millisecond, Logger: quiet})
		if err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, time.Duration(1+rand.IntN(15))*time.Millisecond)
		if err := r.Run(rctx); err != nil {
			cancel()
			return err
		}
		cancel()
		kills++
	}
	d.say("%d relays were killed at random moments (before, during and after appends) until the outbox was empty", kills)

	// Every event in the topic exactly once.
	seen := map[string]int{}
	desc, err := d.c.DescribeTopic(ctx, "order-events")
	if err != nil {
		return err
	}
	records := 0
	for _, p := range desc.Partitions {
		for off := p.LogStart; off < p.End; {
			resp, err := d.c.Fetch(ctx, client.FetchRequest{Topic: "order-events", Partition: p.Partition, Offset: off})
			if err != nil {
				return err
			}
			for _, rec := range resp.Records {
				seen[header(rec.Headers, outbox.HeaderID)]++
				records++
			}
			off = resp.Next
		}
	}
	once := 0
	for id := range ids {
		if seen[id] == 1 {
			once++
		}
	}
	d.check(once == orders && records == orders, "every order's event is in the topic exactly once (%d of %d ids once, %d records)", once, orders, records)

	// The billing worker, killed after its commit and before its ack now
	// and then: the job comes back and the inbox skips it.
	var handled, killed atomic.Int64
	h := ib.WorkerHandler(billing, inbox.IDFrom{}, func(ctx context.Context, tx *sql.Tx, job *client.Job) error {
		var order, customer string
		var amount int
		if _, err := fmt.Sscanf(string(job.Value), "%s %s %d", &order, &customer, &amount); err != nil {
			return client.Permanent(err)
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO payments (order_id, customer, amount) VALUES ($1, $2, $3)", order, customer, amount)
		return err
	})
	w, err := d.c.NewWorker(client.WorkerOptions{Topic: "order-events", Group: "billing", Concurrency: 4, MaxWait: 50 * time.Millisecond}, func(ctx context.Context, job *client.Job) error {
		if err := h(ctx, job); err != nil {
			return err
		}
		if rand.IntN(3) == 0 {
			killed.Add(1)
			return errKilled
		}
		handled.Add(1)
		return nil
	})
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	werr := make(chan error, 1)
	go func() { werr <- w.Run(wctx) }()
	for handled.Load() < orders && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-werr; err != nil {
		return err
	}
	d.say("the billing worker was killed %d times after its commit and before its ack; each job came back and the inbox skipped it", killed.Load())
	var rows, distinct, sum int
	if err := billing.QueryRowContext(ctx, "SELECT COUNT(*), COUNT(DISTINCT order_id), COALESCE(SUM(amount), 0) FROM payments").Scan(&rows, &distinct, &sum); err != nil {
		return err
	}
	d.check(rows == orders && distinct == orders && sum == total, "every payment is applied exactly once (%d rows for %d orders, total %d of %d)", rows, orders, sum, total)
	return nil
}
