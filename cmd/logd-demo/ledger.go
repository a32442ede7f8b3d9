package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/logd-dev/logd/inbox"
)

// ledger is a handler's own SQLite database in the credit story: a
// balances table, and the inbox table in which the idempotent handler
// records each job id in the same transaction as the credit.
type ledger struct {
	path string
}

func newLedger(dir, name string) *ledger { return &ledger{path: filepath.Join(dir, name+".db")} }

// open opens the database and creates its tables if missing; the caller
// closes it. Each call opens the file anew, as a restarted worker would.
func (l *ledger) open(ctx context.Context) (*sql.DB, error) {
	db, err := openSQLite(l.path)
	if err != nil {
		return nil, err
	}
	ddl, _ := inbox.SQLiteSchema(inbox.DefaultTable)
	ddl = append(ddl, "CREATE TABLE IF NOT EXISTS balances (account TEXT PRIMARY KEY, balance INTEGER NOT NULL)")
	if err := execAll(ctx, db, ddl); err != nil {
		db.Close()
		return nil, fmt.Errorf("ledger %s: %w", l.path, err)
	}
	return db, nil
}

func credit(ctx context.Context, tx *sql.Tx, account string, amount int) error {
	_, err := tx.ExecContext(ctx, "INSERT INTO balances (account, balance) VALUES ($1, $2) ON CONFLICT (account) DO UPDATE SET balance = balance + excluded.balance", account, amount)
	return err
}

// creditUnsafe adds amount with no memory of the job: a redelivery credits
// twice.
func (l *ledger) creditUnsafe(account string, amount int) (err error) {
	ctx := context.Background()
	db, err := l.open(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := credit(ctx, tx, account, amount); err != nil {
		return err
	}
	return tx.Commit()
}

// creditOnce adds amount and records jobID in the same transaction
// (inbox.Process); a job already recorded changes nothing.
func (l *ledger) creditOnce(jobID, account string, amount int) (applied bool, err error) {
	ctx := context.Background()
	db, err := l.open(ctx)
	if err != nil {
		return false, err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	ib, err := inbox.New(inbox.Options{})
	if err != nil {
		return false, err
	}
	return ib.Process(ctx, db, jobID, func(tx *sql.Tx) error { return credit(ctx, tx, account, amount) })
}

func (l *ledger) balance(account string) (n int, err error) {
	ctx := context.Background()
	db, err := l.open(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	err = db.QueryRowContext(ctx, "SELECT balance FROM balances WHERE account = $1", account).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}
