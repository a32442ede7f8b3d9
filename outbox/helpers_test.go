package outbox_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
	"github.com/logd-dev/logd/outbox"
)

// backend is a database the tests run on.
type backend struct {
	name   string
	open   func(t testing.TB) *sql.DB // a fresh, empty database
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
		{name: "sqlite", open: sqliteDB, schema: outbox.SQLiteSchema},
		{name: "postgres", open: postgresDB, schema: outbox.PostgresSchema},
	}
}

func testContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// env is a logd node, a client and a database with an outbox.
type env struct {
	c  *client.Client
	db *sql.DB
	ob *outbox.Outbox
}

func newBenchEnv(b *testing.B, be backend) env {
	return newEnv(b, be, map[string]map[string]string{"bench": nil})
}

func newEnv(t testing.TB, b backend, topics map[string]map[string]string) env {
	t.Helper()
	srv := logdtest.Start(t, logdtest.Options{})
	c, err := client.New(srv.URL(), client.Options{Retry: client.RetryPolicy{MaxBackoff: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx := testContext(t)
	for name, cfg := range topics {
		if _, err := c.CreateTopic(ctx, name, 3, cfg); err != nil {
			t.Fatal(err)
		}
	}
	db := b.open(t)
	ddl, err := b.schema(outbox.DefaultTable)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ddl {
		if _, err := db.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	ob, err := outbox.New(outbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return env{c: c, db: db, ob: ob}
}

// readAll returns every record of the topic, partition by partition.
func readAll(t *testing.T, c *client.Client, topic string) []client.FetchedRecord {
	t.Helper()
	ctx := testContext(t)
	d, err := c.DescribeTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var out []client.FetchedRecord
	for _, p := range d.Partitions {
		for off := p.LogStart; off < p.End; {
			resp, err := c.Fetch(ctx, client.FetchRequest{Topic: topic, Partition: p.Partition, Offset: off})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, resp.Records...)
			if resp.Next <= off {
				t.Fatalf("fetch %s/%d at %d made no progress", topic, p.Partition, off)
			}
			off = resp.Next
		}
	}
	return out
}

func header(r client.FetchedRecord, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// waitFor polls cond every 10 ms for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
