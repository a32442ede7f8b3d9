package outbox

import (
	"fmt"
	"strings"

	"github.com/logd-dev/logd/internal/sqlident"
)

// ValidTable reports whether name may name an outbox table: an SQL
// identifier of ASCII letters, digits and underscores that does not start
// with a digit, at most 57 bytes (so that name+"_lease" fits PostgreSQL's
// 63). Names are spliced into SQL text, so nothing else is accepted.
func ValidTable(name string) error {
	if !sqlident.Valid(name, 57) {
		return fmt.Errorf("%w: %q", ErrBadTable, name)
	}
	return nil
}

// SQLiteSchema returns the DDL of the outbox and lease tables on SQLite,
// one statement per element, each idempotent (IF NOT EXISTS):
//
//	CREATE TABLE IF NOT EXISTS <table> (
//	    id         TEXT PRIMARY KEY,  -- outbox id: sorts by creation
//	    topic      TEXT NOT NULL,
//	    msg_key    BLOB,              -- NULL for a null key
//	    value      BLOB,              -- NULL for a null value
//	    headers    BLOB,              -- JSON array of {Key, Value}, or NULL
//	    created_ms INTEGER NOT NULL   -- Unix ms of the Write
//	) WITHOUT ROWID;
//	CREATE TABLE IF NOT EXISTS <table>_lease (
//	    name       TEXT PRIMARY KEY,  -- RelayOptions.Name
//	    holder     TEXT NOT NULL,     -- RelayOptions.Holder
//	    expires_ms INTEGER NOT NULL
//	);
//
// SQLite compares TEXT with BINARY collation by default, the byte order
// ids sort in.
func SQLiteSchema(table string) ([]string, error) {
	if err := ValidTable(table); err != nil {
		return nil, err
	}
	return []string{
		"CREATE TABLE IF NOT EXISTS " + table + " (id TEXT PRIMARY KEY, topic TEXT NOT NULL, msg_key BLOB, value BLOB, headers BLOB, created_ms INTEGER NOT NULL) WITHOUT ROWID",
		"CREATE TABLE IF NOT EXISTS " + table + "_lease (name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_ms INTEGER NOT NULL)",
	}, nil
}

// PostgresSchema returns the DDL of the outbox and lease tables on
// PostgreSQL, one statement per element, each idempotent:
//
//	CREATE TABLE IF NOT EXISTS <table> (
//	    id         TEXT COLLATE "C" PRIMARY KEY,  -- byte order: id order
//	    topic      TEXT NOT NULL,
//	    msg_key    BYTEA,
//	    value      BYTEA,
//	    headers    BYTEA,
//	    created_ms BIGINT NOT NULL
//	);
//	CREATE TABLE IF NOT EXISTS <table>_lease (
//	    name       TEXT PRIMARY KEY,
//	    holder     TEXT NOT NULL,
//	    expires_ms BIGINT NOT NULL
//	);
func PostgresSchema(table string) ([]string, error) {
	if err := ValidTable(table); err != nil {
		return nil, err
	}
	return []string{
		"CREATE TABLE IF NOT EXISTS " + table + ` (id TEXT COLLATE "C" PRIMARY KEY, topic TEXT NOT NULL, msg_key BYTEA, value BYTEA, headers BYTEA, created_ms BIGINT NOT NULL)`,
		"CREATE TABLE IF NOT EXISTS " + table + "_lease (name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_ms BIGINT NOT NULL)",
	}, nil
}

// quoteList is "$from, $from+1, …" for n placeholders.
func quoteList(from, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "$%d", from+i)
	}
	return b.String()
}
