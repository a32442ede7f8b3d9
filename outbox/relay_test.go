package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/syncbuf"
	"github.com/logd-dev/logd/outbox"
)

var errCrash = errors.New("injected crash")

// quiet discards the relay's warnings (the crash tests make many).
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// committed is what a test wrote: the committed ids by key in write
// order, and the ids of rolled back transactions.
type committed struct {
	byKey      map[string][]string
	rolledBack map[string]bool
	n          int
}

// writeTxs writes n transactions of 1-4 messages over 4 keys; about one in
// six is rolled back.
func writeTxs(t *testing.T, ctx context.Context, e env, topic string, rng *rand.Rand, n int, into *committed) {
	t.Helper()
	for range n {
		tx, err := e.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		type w struct{ key, id string }
		var ws []w
		for range 1 + rng.IntN(4) {
			key := fmt.Sprintf("k%d", rng.IntN(4))
			id, err := e.ob.Write(ctx, tx, outbox.Message{Topic: topic, Key: []byte(key), Value: []byte("v-" + key),
				Headers: []client.Header{{Key: "h", Value: []byte(key)}}})
			if err != nil {
				t.Fatal(err)
			}
			ws = append(ws, w{key, id})
		}
		if rng.IntN(6) == 0 {
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			for _, x := range ws {
				into.rolledBack[x.id] = true
			}
			continue
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		for _, x := range ws {
			into.byKey[x.key] = append(into.byKey[x.key], x.id)
			into.n++
		}
	}
}

// check returns what is wrong with the topic's records: a committed id
// missing or appended twice, a rolled back id appended, a key's records
// out of id order.
func check(recs []client.FetchedRecord, want committed) []string {
	var bad []string
	seen := map[string]int{}
	byKey := map[string][]client.FetchedRecord{}
	for _, r := range recs {
		id := r.Headers[len(r.Headers)-1]
		if id.Key != outbox.HeaderID {
			bad = append(bad, fmt.Sprintf("record %d/%d: last header %q", r.Partition, r.Offset, id.Key))
			continue
		}
		seen[string(id.Value)]++
		byKey[string(r.Key)] = append(byKey[string(r.Key)], r)
	}
	for key, ids := range want.byKey {
		for _, id := range ids {
			if seen[id] != 1 {
				bad = append(bad, fmt.Sprintf("id %s (key %s) appended %d times", id, key, seen[id]))
			}
		}
		rs := byKey[key]
		slices.SortFunc(rs, func(a, b client.FetchedRecord) int { return int(a.Offset - b.Offset) })
		for i := 1; i < len(rs); i++ {
			a, b := header(rs[i-1], outbox.HeaderID), header(rs[i], outbox.HeaderID)
			if rs[i].Partition != rs[0].Partition || a >= b && a != b {
				bad = append(bad, fmt.Sprintf("key %s: %s at %d/%d after %s", key, b, rs[i].Partition, rs[i].Offset, a))
			}
		}
	}
	for id := range want.rolledBack {
		if seen[id] != 0 {
			bad = append(bad, "rolled back id "+id+" appended")
		}
	}
	if len(recs) != want.n && len(bad) == 0 {
		bad = append(bad, fmt.Sprintf("%d records for %d committed messages", len(recs), want.n))
	}
	return bad
}

func pending(t *testing.T, ctx context.Context, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+outbox.DefaultTable).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// crashRounds runs generations of relays, each stopped at a random point
// (cancelled at an injected point: before a produce, after a produce and
// before its delete) while writers add rows between generations, then
// one relay that is not stopped until the table is empty. It returns the
// check's findings.
func crashRounds(t *testing.T, e env, topic string, seed uint64, dropKeys bool) []string {
	ctx := testContext(t)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	want := committed{byKey: map[string][]string{}, rolledBack: map[string]bool{}}
	crashes := 0
	for gen := 0; gen < 6; gen++ {
		writeTxs(t, ctx, e, topic, rng, 5+rng.IntN(10), &want)
		rctx, cancel := context.WithCancel(ctx)
		r, err := e.ob.NewRelay(outbox.RelayOptions{Client: e.c, DB: e.db, BatchSize: 1 + rng.IntN(8), PollInterval: 2 * time.Millisecond, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if dropKeys {
			outbox.DropKeys(r)
		}
		// Stop at the k-th point of the chosen kind.
		at := outbox.Point(rng.IntN(2))
		k := rng.IntN(4)
		outbox.SetHook(r, func(p outbox.Point) error {
			if p != at {
				return nil
			}
			if k--; k < 0 {
				crashes++
				cancel()
				return errCrash
			}
			return nil
		})
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx) }()
		// A generation ends at its crash, or when it relayed everything.
		deadline := time.Now().Add(20 * time.Second)
		for rctx.Err() == nil && pending(t, ctx, e.db) > 0 && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	// The last relay runs to the end.
	r, err := e.ob.NewRelay(outbox.RelayOptions{Client: e.c, DB: e.db, BatchSize: 5, PollInterval: 2 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	waitFor(t, 30*time.Second, "the outbox to drain", func() bool { return pending(t, ctx, e.db) == 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d: %d committed, %d rolled back, %d crashes", seed, want.n, len(want.rolledBack), crashes)
	return check(readAll(t, e.c, topic), want)
}

func rounds() int {
	if os.Getenv("LOGD_FAULT_LONG") == "1" {
		return 40
	}
	return 4
}

// TestRelayCrashes: every committed message is in the topic exactly once
// and in its key's order, whatever point relays are stopped at; rolled
// back messages never are.
func TestRelayCrashes(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			topics := map[string]map[string]string{}
			for i := range rounds() {
				topics[fmt.Sprintf("orders-%d", i)] = nil
			}
			e := newEnv(t, b, topics)
			seed := uint64(time.Now().UnixNano())
			for i := range rounds() {
				s := seed + uint64(i)
				if bad := crashRounds(t, e, fmt.Sprintf("orders-%d", i), s, false); len(bad) > 0 {
					t.Fatalf("seed %d:\n%s", s, bad)
				}
			}
		})
	}
}

// TestRelayCrashesWithoutKeys: with the idempotency keys dropped, a crash
// after a produce duplicates records, and the check says so.
func TestRelayCrashesWithoutKeys(t *testing.T) {
	e := newEnv(t, backends()[0], map[string]map[string]string{"orders": nil})
	// Seeds until one crashes after a produce (most do).
	for s := uint64(1); s < 20; s++ {
		if bad := crashRounds(t, e, "orders", s, true); len(bad) > 0 {
			t.Logf("without keys, seed %d: %d findings, first: %s", s, len(bad), bad[0])
			return
		}
	}
	t.Fatal("no duplicate without idempotency keys: the crash test cannot fail")
}

// TestRelayWindowTooSmall: a topic whose idempotency window holds fewer
// keys than a batch draws a warning, and a batch re-appended after a crash
// appends again the keys the window evicted.
func TestRelayWindowTooSmall(t *testing.T) {
	e := newEnv(t, backends()[0], map[string]map[string]string{"small": {"idempotency.max.keys": "2", "idempotency.window.ms": "60000"}})
	ctx := testContext(t)
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := e.ob.Write(ctx, tx, outbox.Message{Topic: "small", Key: []byte("k"), Value: fmt.Appendf(nil, "%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	run := func(crash bool) outbox.Stats {
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		r, err := e.ob.NewRelay(outbox.RelayOptions{Client: e.c, DB: e.db, BatchSize: 5, PollInterval: 2 * time.Millisecond, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if crash {
			outbox.SetHook(r, func(p outbox.Point) error {
				if p == outbox.AfterProduce {
					cancel()
					return errCrash
				}
				return nil
			})
		}
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx) }()
		if crash {
			<-rctx.Done()
		} else {
			waitFor(t, 10*time.Second, "the outbox to drain", func() bool { return pending(t, ctx, e.db) == 0 })
			cancel()
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return r.Stats()
	}
	st := run(true)
	if st.WindowWarnings != 1 {
		t.Fatalf("window warnings %d, want 1 (max.keys 2 < batch 5, window 60 s < 1 h)", st.WindowWarnings)
	}
	st = run(false)
	recs := readAll(t, e.c, "small")
	if len(recs) != 8 || st.Duplicates != 2 {
		t.Fatalf("%d records and %d duplicates, want 8 and 2: the 3 keys evicted from a window of 2 appended again", len(recs), st.Duplicates)
	}
}

// TestTwoRelaysOneActive: two relays of one table take turns through the
// lease; when the active one stops, the other takes over and drains.
func TestTwoRelaysOneActive(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { twoRelays(t, b) })
	}
}

func twoRelays(t *testing.T, b backend) {
	e := newEnv(t, b, map[string]map[string]string{"orders": nil})
	ctx := testContext(t)
	rng := rand.New(rand.NewPCG(1, 2))
	want := committed{byKey: map[string][]string{}, rolledBack: map[string]bool{}}
	var relays [2]*outbox.Relay
	var cancels [2]context.CancelFunc
	var wg sync.WaitGroup
	for i := range relays {
		r, err := e.ob.NewRelay(outbox.RelayOptions{Client: e.c, DB: e.db, BatchSize: 3, PollInterval: 2 * time.Millisecond, Logger: quiet, Holder: fmt.Sprintf("relay-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		relays[i] = r
		rctx, cancel := context.WithCancel(ctx)
		cancels[i] = cancel
		wg.Go(func() {
			if err := r.Run(rctx); err != nil {
				t.Error(err)
			}
		})
	}
	defer func() {
		for _, c := range cancels {
			c()
		}
		wg.Wait()
	}()
	both := 0
	for range 20 {
		writeTxs(t, ctx, e, "orders", rng, 2, &want)
		if relays[0].Stats().Active && relays[1].Stats().Active {
			both++
		}
		time.Sleep(2 * time.Millisecond)
	}
	waitFor(t, 10*time.Second, "the outbox to drain", func() bool { return pending(t, ctx, e.db) == 0 })
	active := 0
	if relays[1].Stats().Relayed > 0 && relays[0].Stats().Relayed == 0 {
		active = 1
	}
	if relays[1-active].Stats().Relayed != 0 {
		t.Fatalf("both relays relayed: %+v and %+v", relays[0].Stats(), relays[1].Stats())
	}
	if both > 0 {
		t.Fatalf("both relays active at %d samples", both)
	}
	cancels[active]()
	writeTxs(t, ctx, e, "orders", rng, 5, &want)
	waitFor(t, 10*time.Second, "the standby to drain", func() bool { return pending(t, ctx, e.db) == 0 })
	if relays[1-active].Stats().Relayed == 0 {
		t.Fatal("the standby relayed nothing after the active relay stopped")
	}
	if bad := check(readAll(t, e.c, "orders"), want); len(bad) > 0 {
		t.Fatal(bad)
	}
}

// TestRelayStandbyStatsAndLeaseLog: a standby relay counts the pending
// rows without the lease, and logs whom it waits for until when; then
// that it took the lease once the holder's expired, that it lost it to
// another, and that it stopped.
func TestRelayStandbyStatsAndLeaseLog(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { standbyRelay(t, b) })
	}
}

func standbyRelay(t *testing.T, b backend) {
	e := newEnv(t, b, map[string]map[string]string{"orders": nil})
	ctx := testContext(t)
	lease := outbox.DefaultTable + "_lease"
	// A relay killed with its lease held: the lease runs for an hour.
	if _, err := e.db.ExecContext(ctx, "INSERT INTO "+lease+" (name, holder, expires_ms) VALUES ('default', 'dead-relay', $1)", time.Now().Add(time.Hour).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	want := committed{byKey: map[string][]string{}, rolledBack: map[string]bool{}}
	writeTxs(t, ctx, e, "orders", rng, 4, &want)
	rows := pending(t, ctx, e.db)
	var logs syncbuf.Buffer
	r, err := e.ob.NewRelay(outbox.RelayOptions{Client: e.c, DB: e.db, PollInterval: 2 * time.Millisecond, Holder: "standby",
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.Run(rctx); err != nil {
			t.Error(err)
		}
	}()
	defer func() { cancel(); <-done }()

	waitFor(t, 10*time.Second, "the standby to count the pending rows", func() bool { s := r.Stats(); return !s.Active && s.Pending == int64(rows) })
	waitFor(t, 10*time.Second, "the standby to say whom it waits for", func() bool {
		return strings.Contains(logs.String(), `msg="outbox relay: waiting for the lease"`) && strings.Contains(logs.String(), "held_by=dead-relay expires=")
	})
	if _, err := e.db.ExecContext(ctx, "UPDATE "+lease+" SET expires_ms = 0"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the standby to take over and drain", func() bool { return pending(t, ctx, e.db) == 0 })
	if !strings.Contains(logs.String(), `msg="outbox relay: took the lease"`) {
		t.Fatalf("no log of the lease taken:\n%s", logs.String())
	}
	if _, err := e.db.ExecContext(ctx, "UPDATE "+lease+" SET holder = 'thief', expires_ms = $1", time.Now().Add(time.Hour).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the relay to say it lost the lease", func() bool {
		return strings.Contains(logs.String(), `msg="outbox relay: lost the lease"`) && strings.Contains(logs.String(), "held_by=thief")
	})
	cancel()
	<-done
	for _, want := range []string{`msg="outbox relay: started" table=logd_outbox lease=default holder=standby`, `msg="outbox relay: stopped; lease released"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, logs.String())
		}
	}
}
