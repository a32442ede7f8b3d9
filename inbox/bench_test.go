package inbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/logd-dev/logd/inbox"
)

// BenchmarkEffect is a payment's effect in a transaction of its own, the
// baseline; BenchmarkProcess is the same effect through the inbox. The
// difference is the inbox's overhead per message.
func BenchmarkEffect(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			db := ledger(b, be)
			ctx := context.Background()
			for i := 0; b.Loop(); i++ {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := pay(ctx, tx, fmt.Sprintf("m%d", i), "a0", 1); err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkProcess(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			db := ledger(b, be)
			ib, _ := inbox.New(inbox.Options{})
			ctx := context.Background()
			for i := 0; b.Loop(); i++ {
				id := fmt.Sprintf("m%d", i)
				if _, err := ib.Process(ctx, db, id, func(tx *sql.Tx) error { return pay(ctx, tx, id, "a0", 1) }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
