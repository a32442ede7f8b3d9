package inbox_test

import (
	"context"
	"database/sql"
	"log"

	_ "modernc.org/sqlite"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/inbox"
)

// A consumer loop: each record's effect and its message id commit in one
// database transaction (Inbox.Process), and the group's offsets are
// committed only after, so a crash anywhere redelivers at most what the
// inbox then skips. The id comes from the outbox relay's header
// (inbox.HeaderID). With ManualCommit, Commit commits the records the
// earlier Polls returned.
func ExampleInbox_Process() {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:payments.db?_pragma=busy_timeout(10000)")
	if err != nil {
		log.Fatal(err)
	}
	ddl, err := inbox.SQLiteSchema(inbox.DefaultTable)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range ddl {
		if _, err := db.ExecContext(ctx, s); err != nil {
			log.Fatal(err)
		}
	}
	ib, err := inbox.New(inbox.Options{})
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.New("127.0.0.1:7070", client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	gc, err := c.NewGroupConsumer(client.GroupConsumerOptions{Group: "payments", Topics: []string{"orders"}, ManualCommit: true})
	if err != nil {
		log.Fatal(err)
	}
	defer gc.Close(ctx)
	for {
		recs, err := gc.Poll(ctx)
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range recs {
			id, err := inbox.IDFrom{}.ID(r.Topic, r.Partition, r.Offset, r.Headers)
			if err != nil {
				log.Fatal(err) // a record without the outbox header
			}
			applied, err := ib.Process(ctx, db, id, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, "UPDATE accounts SET paid = paid + 1 WHERE order_key = $1", string(r.Key))
				return err
			})
			if err != nil {
				log.Fatal(err) // nothing committed: the record comes again
			}
			if !applied {
				log.Printf("%s: already processed", id)
			}
		}
		if err := gc.Commit(ctx); err != nil {
			log.Fatal(err) // the records come again, and the inbox skips them
		}
	}
}
