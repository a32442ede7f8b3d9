package inbox_test

import (
	"database/sql"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/logd-dev/logd/internal/pgtest"
)

// pg is the package's one PostgreSQL server (pgtest.Shared).
var pg = pgtest.Shared{Driver: "pgx"}

// postgresDB returns a new database on the package's server.
func postgresDB(t testing.TB) *sql.DB { return pg.DB(t) }

func stopPostgres() { pg.Stop() }
