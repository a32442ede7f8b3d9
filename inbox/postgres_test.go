package inbox_test

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/logd-dev/logd/internal/pgtest"
)

// pg is the package's one PostgreSQL server, started by the first test
// that needs it and stopped by TestMain; each test gets a database of
// its own.
var pg struct {
	once sync.Once
	srv  *pgtest.Server
	err  error
	mu   sync.Mutex
	n    int // guarded by mu: databases made
}

// postgresDB returns a new database on the package's server. Without
// PostgreSQL the test skips, and fails under CI=true.
func postgresDB(t testing.TB) *sql.DB {
	t.Helper()
	pg.once.Do(func() { pg.srv, pg.err = pgtest.Start() })
	if pg.err != nil {
		if errors.Is(pg.err, pgtest.ErrNoPostgres) && os.Getenv("CI") != "true" {
			t.Skip(pg.err)
		}
		t.Fatal(pg.err)
	}
	pg.mu.Lock()
	pg.n++
	name := fmt.Sprintf("t%d", pg.n)
	pg.mu.Unlock()
	admin, err := sql.Open("pgx", pg.srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(testContext(t), "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", pg.srv.DSN(name))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(20)
	db.SetConnMaxIdleTime(time.Minute)
	t.Cleanup(func() { db.Close() })
	return db
}

func stopPostgres() {
	if pg.srv != nil {
		if err := pg.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
}
