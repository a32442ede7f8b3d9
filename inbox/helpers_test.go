package inbox_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/logd-dev/logd/inbox"
)

type backend struct {
	name   string
	open   func(t testing.TB) *sql.DB
	schema func(table string) ([]string, error)
}

func sqliteDB(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+t.TempDir()+"/db.sqlite?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func backends() []backend {
	return []backend{
		{name: "sqlite", open: sqliteDB, schema: inbox.SQLiteSchema},
		{name: "postgres", open: postgresDB, schema: inbox.PostgresSchema},
	}
}

func testContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// ledger opens a database with the inbox table and a small ledger:
// accounts with balances and a payments log without a unique key, so an
// effect applied twice shows as two rows.
func ledger(t testing.TB, b backend) *sql.DB {
	t.Helper()
	db := b.open(t)
	ddl, err := b.schema(inbox.DefaultTable)
	if err != nil {
		t.Fatal(err)
	}
	ddl = append(ddl,
		"CREATE TABLE accounts (id TEXT PRIMARY KEY, balance BIGINT NOT NULL)",
		"CREATE TABLE payments (msg TEXT NOT NULL, account TEXT NOT NULL, amount BIGINT NOT NULL)",
		"INSERT INTO accounts (id, balance) VALUES ('a0', 0), ('a1', 0), ('a2', 0)")
	for _, s := range ddl {
		if _, err := db.ExecContext(testContext(t), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return db
}

// pay is a payment's effect.
func pay(ctx context.Context, tx *sql.Tx, msg, account string, amount int64) error {
	if _, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance + $1 WHERE id = $2", amount, account); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO payments (msg, account, amount) VALUES ($1, $2, $3)", msg, account, amount)
	return err
}
