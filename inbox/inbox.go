package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/logd-dev/logd/internal/sqlident"
)

// DefaultTable is the inbox table's default name.
const DefaultTable = "logd_inbox"

// DefaultWindow is how long ids are kept by default.
const DefaultWindow = 7 * 24 * time.Hour

// MaxIDBytes bounds a message id.
const MaxIDBytes = 512

// maxAttempts bounds the transactions one Process call runs after
// serialization failures and busy errors.
const maxAttempts = 20

// Options configure an Inbox. The zero value is the default table with a
// window of DefaultWindow on the wall clock.
type Options struct {
	// Table is the inbox table. Default DefaultTable.
	Table string
	// Window is how long a processed id is kept (see the package doc for
	// what it must cover). Default DefaultWindow.
	Window time.Duration
	// Now is the clock that stamps ids and judges the window. Default
	// time.Now.
	Now func() time.Time
}

// Validate reports options that cannot be used.
func (o Options) Validate() error {
	if o.Table != "" {
		if err := ValidTable(o.Table); err != nil {
			return err
		}
	}
	if o.Window < 0 {
		return fmt.Errorf("inbox: window %v is negative", o.Window)
	}
	return nil
}

// ValidTable reports whether name may name an inbox table. Names are
// spliced into SQL text, so only plain identifiers are accepted.
func ValidTable(name string) error {
	if !sqlident.Valid(name, 63) {
		return fmt.Errorf("%w: %q", ErrBadTable, name)
	}
	return nil
}

// SQLiteSchema returns the inbox table's DDL on SQLite (idempotent):
//
//	CREATE TABLE IF NOT EXISTS <table> (
//	    id           TEXT PRIMARY KEY,  -- the message id
//	    processed_ms INTEGER NOT NULL   -- Unix ms of the commit's start
//	) WITHOUT ROWID;
//	CREATE INDEX IF NOT EXISTS <table>_processed ON <table> (processed_ms);
func SQLiteSchema(table string) ([]string, error) {
	if err := ValidTable(table); err != nil {
		return nil, err
	}
	return []string{
		"CREATE TABLE IF NOT EXISTS " + table + " (id TEXT PRIMARY KEY, processed_ms INTEGER NOT NULL) WITHOUT ROWID",
		"CREATE INDEX IF NOT EXISTS " + table + "_processed ON " + table + " (processed_ms)",
	}, nil
}

// PostgresSchema returns the inbox table's DDL on PostgreSQL (idempotent):
//
//	CREATE TABLE IF NOT EXISTS <table> (
//	    id           TEXT PRIMARY KEY,
//	    processed_ms BIGINT NOT NULL
//	);
//	CREATE INDEX IF NOT EXISTS <table>_processed ON <table> (processed_ms);
func PostgresSchema(table string) ([]string, error) {
	if err := ValidTable(table); err != nil {
		return nil, err
	}
	if len(table) > 53 {
		return nil, fmt.Errorf("%w: %q (its index name would exceed 63 bytes)", ErrBadTable, table)
	}
	return []string{
		"CREATE TABLE IF NOT EXISTS " + table + " (id TEXT PRIMARY KEY, processed_ms BIGINT NOT NULL)",
		"CREATE INDEX IF NOT EXISTS " + table + "_processed ON " + table + " (processed_ms)",
	}, nil
}

// Inbox records processed message ids in one table. It is safe for
// concurrent use.
type Inbox struct {
	table  string
	window time.Duration
	now    func() time.Time

	// apart records the id after the effect's transaction, in one of
	// its own (export_test.go): the protection switched off. hook, if
	// set, runs between the two commits; an error stops there as a crash
	// would.
	apart bool
	hook  func() error

	insert string
}

// New returns an Inbox of the table the options name. It does not touch
// the database; create the table with SQLiteSchema or PostgresSchema.
func New(opts Options) (*Inbox, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Table == "" {
		opts.Table = DefaultTable
	}
	if opts.Window == 0 {
		opts.Window = DefaultWindow
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Inbox{table: opts.Table, window: opts.Window, now: opts.Now,
		insert: "INSERT INTO " + opts.Table + " (id, processed_ms) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING"}, nil
}

// Process runs fn in a transaction that also records msgID, and commits
// it; if msgID was already recorded it runs nothing and returns false.
// It returns true once fn's effect and the id are committed. An error
// from fn rolls both back and is returned (wrapped); the message may then
// be delivered again. Transactions that fail with a serialization
// failure, a deadlock or a busy database are retried, calling fn again,
// so fn must act only through tx.
func (ib *Inbox) Process(ctx context.Context, db *sql.DB, msgID string, fn func(tx *sql.Tx) error) (bool, error) {
	if msgID == "" || len(msgID) > MaxIDBytes {
		return false, fmt.Errorf("%w: %d bytes", ErrBadID, len(msgID))
	}
	var err error
	for attempt := 1; ; attempt++ {
		var applied bool
		applied, err = ib.once(ctx, db, msgID, fn)
		if err == nil || !retryable(err) || attempt == maxAttempts || ctx.Err() != nil {
			return applied, err
		}
		d := time.Duration(min(attempt, 8)) * 5 * time.Millisecond
		t := time.NewTimer(d/2 + rand.N(d/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return false, err
		case <-t.C:
		}
	}
}

func (ib *Inbox) once(ctx context.Context, db *sql.DB, msgID string, fn func(tx *sql.Tx) error) (bool, error) {
	if ib.apart {
		return ib.onceApart(ctx, db, msgID, fn)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("inbox: begin: %w", err)
	}
	defer tx.Rollback()
	// The id first: a concurrent call for the same id waits here (or, on
	// SQLite, for the database lock) instead of running its effect.
	res, err := tx.ExecContext(ctx, ib.insert, msgID, ib.now().UnixMilli())
	if err != nil {
		return false, fmt.Errorf("inbox: record %q: %w", msgID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	if err := fn(tx); err != nil {
		return false, fmt.Errorf("inbox: handle %q: %w", msgID, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("inbox: commit %q: %w", msgID, err)
	}
	return true, nil
}

// onceApart is Process with the protection switched off, the way it is
// often written: look the id up, commit the effect, then record the id.
// A crash between the two commits (hook) or a concurrent call applies
// the effect twice; the tests show it.
func (ib *Inbox) onceApart(ctx context.Context, db *sql.DB, msgID string, fn func(tx *sql.Tx) error) (bool, error) {
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+ib.table+" WHERE id = $1", msgID).Scan(&n); err != nil {
		return false, fmt.Errorf("inbox: look up %q: %w", msgID, err)
	}
	if n > 0 {
		return false, nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("inbox: begin: %w", err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return false, fmt.Errorf("inbox: handle %q: %w", msgID, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("inbox: commit %q: %w", msgID, err)
	}
	if ib.hook != nil {
		if err := ib.hook(); err != nil {
			return false, err
		}
	}
	if _, err := db.ExecContext(ctx, ib.insert, msgID, ib.now().UnixMilli()); err != nil {
		return false, fmt.Errorf("inbox: record %q: %w", msgID, err)
	}
	return true, nil
}

// retryable reports a transaction failure worth a new transaction:
// PostgreSQL's serialization_failure (40001) and deadlock_detected
// (40P01), SQLite's SQLITE_BUSY (5) and SQLITE_LOCKED (6), recognised by
// the drivers' SQLState and Code methods so this package needs neither
// driver. The failure may come from fn's own statements: the transaction
// is lost either way.
func retryable(err error) bool {
	if s, ok := errors.AsType[interface {
		error
		SQLState() string
	}](err); ok {
		switch s.SQLState() {
		case "40001", "40P01":
			return true
		}
	}
	if c, ok := errors.AsType[interface {
		error
		Code() int
	}](err); ok {
		switch c.Code() & 0xff { // the primary code of an extended one
		case 5, 6:
			return true
		}
	}
	return false
}

// Prune deletes ids processed longer than the window ago and returns how
// many it deleted.
func (ib *Inbox) Prune(ctx context.Context, db *sql.DB) (int64, error) {
	cut := ib.now().Add(-ib.window).UnixMilli()
	res, err := db.ExecContext(ctx, "DELETE FROM "+ib.table+" WHERE processed_ms < $1", cut)
	if err != nil {
		return 0, fmt.Errorf("inbox: prune %s: %w", ib.table, err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
