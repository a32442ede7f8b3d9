package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/logd-dev/logd/outbox"
)

func TestIDsIncreaseAndCarryTheirTime(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123)
	ob, err := outbox.New(outbox.Options{Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	prev := ""
	for i := range 1000 {
		if i == 500 {
			at = at.Add(-time.Second) // a clock that steps back
		}
		id := ob.NewID()
		if !outbox.ValidID(id) || id <= prev {
			t.Fatalf("id %d %q after %q", i, id, prev)
		}
		prev = id
	}
	got, err := outbox.IDTime(prev)
	if err != nil || got.UnixMilli() != 1_700_000_000_123 {
		t.Fatalf("IDTime %v, %v", got, err)
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	for _, name := range []string{"", "1x", "a;drop table x", `a"b`, "ünïcode", "a b", string(make([]byte, 58))} {
		if _, err := outbox.New(outbox.Options{Table: name}); name != "" && !errors.Is(err, outbox.ErrBadTable) {
			t.Errorf("table %q: %v", name, err)
		}
		if _, err := outbox.SQLiteSchema(name); !errors.Is(err, outbox.ErrBadTable) {
			t.Errorf("schema %q: %v", name, err)
		}
	}
	db := sqliteDB(t)
	ddl, _ := outbox.SQLiteSchema(outbox.DefaultTable)
	for _, s := range ddl {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	ob, _ := outbox.New(outbox.Options{})
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, m := range []outbox.Message{{}, {Topic: "t", ID: "not-an-id"}, {Topic: "t", ID: "8ZZZZZZZZZZZZZZZZZZZZZZZZZ"}} {
		if _, err := ob.Write(context.Background(), tx, m); !errors.Is(err, outbox.ErrBadMessage) {
			t.Errorf("message %+v: %v", m, err)
		}
	}
	var n int
	if err := tx.QueryRow("SELECT COUNT(*) FROM " + outbox.DefaultTable).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows, %v", n, err)
	}
}
