package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// Shared is one test binary's PostgreSQL server, started by the first test
// that asks for a database and stopped by the package's TestMain through
// Stop; each test gets a database of its own. Driver names the
// database/sql driver the tests registered (pgx's stdlib: "pgx").
type Shared struct {
	Driver string

	once sync.Once
	srv  *Server
	err  error
	mu   sync.Mutex
	n    int // guarded by mu: databases made
}

// DB returns a new, empty database on the shared server, closed when t
// ends. Without PostgreSQL the test skips, and fails under CI=true, where
// a missing tool is a broken setup.
func (s *Shared) DB(t testing.TB) *sql.DB {
	t.Helper()
	s.once.Do(func() { s.srv, s.err = Start() })
	if s.err != nil {
		if errors.Is(s.err, ErrNoPostgres) && os.Getenv("CI") != "true" {
			t.Skip(s.err)
		}
		t.Fatal(s.err)
	}
	s.mu.Lock()
	s.n++
	name := fmt.Sprintf("t%d", s.n)
	s.mu.Unlock()
	admin, err := sql.Open(s.Driver, s.srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open(s.Driver, s.srv.DSN(name))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(20)
	db.SetConnMaxIdleTime(time.Minute)
	t.Cleanup(func() { db.Close() })
	return db
}

// Stop stops the server if a test started it, reporting a failure to
// stop on stderr (TestMain has no test to fail).
func (s *Shared) Stop() {
	if s.srv != nil {
		if err := s.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
}
