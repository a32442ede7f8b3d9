package inbox_test

import (
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/inbox"
)

var errCrash = errors.New("injected crash")

type payment struct {
	id      string
	account string
	amount  int64
}

// deliveries is an at-least-once delivery queue: a delivery not acked is
// delivered again, and some acked ones are delivered again too (an ack
// the broker lost).
type deliveries struct {
	mu      sync.Mutex
	pending []payment // guarded by mu
	acked   map[string]bool
}

func (d *deliveries) take() (payment, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.pending) == 0 {
		return payment{}, false
	}
	p := d.pending[0]
	d.pending = d.pending[1:]
	return p, true
}

func (d *deliveries) put(p payment) {
	d.mu.Lock()
	d.pending = append(d.pending, p)
	d.mu.Unlock()
}

func (d *deliveries) ack(p payment) {
	d.mu.Lock()
	d.acked[p.id] = true
	d.mu.Unlock()
}

// consume runs 4 consumers over n payments, each delivery stopped at
// random points: in the handler after its effect and before the commit,
// after the commit and before the ack, and (with the protection off)
// between the effect's commit and the id's; some acked deliveries are
// delivered again. It returns the ledger's findings.
func consume(t *testing.T, db *sql.DB, ib *inbox.Inbox, seed uint64, n int, apart bool) []string {
	ctx := testContext(t)
	var rmu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed+1))
	roll := func(k int) bool { rmu.Lock(); defer rmu.Unlock(); return rng.IntN(k) == 0 }
	want := map[string]int64{}
	d := &deliveries{acked: map[string]bool{}}
	for i := range n {
		p := payment{id: fmt.Sprintf("m-%d-%d", seed, i), account: fmt.Sprintf("a%d", rng.IntN(3)), amount: 1 + rng.Int64N(100)}
		want[p.account] += p.amount
		d.put(p)
		if rng.IntN(4) == 0 {
			d.put(p) // delivered twice from the start: concurrent copies
		}
	}
	if apart {
		inbox.Apart(ib, func() error {
			if roll(3) {
				return errCrash
			}
			return nil
		})
	}
	var before [3]int64
	for i := range before {
		if err := db.QueryRowContext(ctx, "SELECT balance FROM accounts WHERE id = $1", fmt.Sprintf("a%d", i)).Scan(&before[i]); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	deadline := time.Now().Add(60 * time.Second)
	for range 4 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				p, ok := d.take()
				if !ok {
					return
				}
				_, err := ib.Process(ctx, db, p.id, func(tx *sql.Tx) error {
					if err := pay(ctx, tx, p.id, p.account, p.amount); err != nil {
						return err
					}
					if roll(4) {
						return errCrash // killed after the effect, before the commit
					}
					return nil
				})
				switch {
				case errors.Is(err, errCrash):
					d.put(p) // never acked: delivered again
					continue
				case err != nil:
					t.Error(err)
					return
				}
				if roll(4) {
					d.put(p) // killed after the commit, before the ack
					continue
				}
				d.ack(p)
				if roll(8) {
					d.put(p) // the ack was lost: delivered again
				}
			}
		})
	}
	wg.Wait()
	var bad []string
	if len(d.pending) > 0 {
		bad = append(bad, fmt.Sprintf("%d deliveries left at the deadline", len(d.pending)))
	}
	rows, err := db.QueryContext(ctx, "SELECT msg, COUNT(*) FROM payments WHERE msg LIKE $1 GROUP BY msg HAVING COUNT(*) <> 1", fmt.Sprintf("m-%d-%%", seed))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var msg string
		var c int
		if err := rows.Scan(&msg, &c); err != nil {
			t.Fatal(err)
		}
		bad = append(bad, fmt.Sprintf("payment %s applied %d times", msg, c))
	}
	rows.Close()
	var applied int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(DISTINCT msg) FROM payments WHERE msg LIKE $1", fmt.Sprintf("m-%d-%%", seed)).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if applied != n {
		bad = append(bad, fmt.Sprintf("%d of %d payments applied", applied, n))
	}
	for i := range before {
		acct := fmt.Sprintf("a%d", i)
		var bal int64
		if err := db.QueryRowContext(ctx, "SELECT balance FROM accounts WHERE id = $1", acct).Scan(&bal); err != nil {
			t.Fatal(err)
		}
		if bal-before[i] != want[acct] {
			bad = append(bad, fmt.Sprintf("account %s moved by %d, want %d", acct, bal-before[i], want[acct]))
		}
	}
	return bad
}

func rounds() int {
	if os.Getenv("LOGD_FAULT_LONG") == "1" {
		return 30
	}
	return 4
}

// TestProcessCrashes: whatever point consumers are stopped at, and however
// often a payment is delivered, concurrently or again after its ack, each
// payment is applied exactly once.
func TestProcessCrashes(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			db := ledger(t, b)
			ib, err := inbox.New(inbox.Options{})
			if err != nil {
				t.Fatal(err)
			}
			seed := uint64(time.Now().UnixNano())
			for i := range rounds() {
				if bad := consume(t, db, ib, seed+uint64(i), 40, false); len(bad) > 0 {
					t.Fatalf("seed %d: %v", seed+uint64(i), bad)
				}
			}
		})
	}
}

// TestProcessCrashesApart: with the id recorded outside the effect's
// transaction, the same consumers apply payments twice, and the check
// says so.
func TestProcessCrashesApart(t *testing.T) {
	db := ledger(t, backends()[0])
	ib, err := inbox.New(inbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for s := uint64(1); s < 10; s++ {
		if bad := consume(t, db, ib, s, 40, true); len(bad) > 0 {
			t.Logf("apart, seed %d: %d findings, first: %s", s, len(bad), bad[0])
			return
		}
	}
	t.Fatal("no double effect with the id outside the transaction: the test cannot fail")
}

// TestConcurrentSameID: calls racing on one id apply its effect once.
func TestConcurrentSameID(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			db := ledger(t, b)
			ctx := testContext(t)
			ib, err := inbox.New(inbox.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for round := range 5 {
				id := fmt.Sprintf("race-%d", round)
				var wg sync.WaitGroup
				var mu sync.Mutex
				applied := 0
				for range 8 {
					wg.Go(func() {
						ok, err := ib.Process(ctx, db, id, func(tx *sql.Tx) error { return pay(ctx, tx, id, "a0", 1) })
						if err != nil {
							t.Error(err)
						}
						if ok {
							mu.Lock()
							applied++
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				var n int
				if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM payments WHERE msg = $1", id).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if applied != 1 || n != 1 {
					t.Fatalf("%s: %d calls applied, %d payments", id, applied, n)
				}
			}
		})
	}
}

// TestPruneWindow: ids older than the window are pruned, after which the
// same id is applied again (the limit the window must cover).
func TestPruneWindow(t *testing.T) {
	db := ledger(t, backends()[0])
	ctx := testContext(t)
	now := time.UnixMilli(1_700_000_000_000)
	ib, err := inbox.New(inbox.Options{Window: time.Hour, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	effect := func(tx *sql.Tx) error { return pay(ctx, tx, "p", "a1", 5) }
	for i, step := range []struct {
		advance     time.Duration
		wantApplied bool
		wantPruned  int64
	}{
		{0, true, 0},
		{30 * time.Minute, false, 0},
		{31 * time.Minute, true, 1}, // pruned: applied again
		{0, false, 0},
	} {
		now = now.Add(step.advance)
		pruned, err := ib.Prune(ctx, db)
		if err != nil || pruned != step.wantPruned {
			t.Fatalf("step %d: pruned %d, %v; want %d", i, pruned, err, step.wantPruned)
		}
		ok, err := ib.Process(ctx, db, "p", effect)
		if err != nil || ok != step.wantApplied {
			t.Fatalf("step %d: applied %v, %v; want %v", i, ok, err, step.wantApplied)
		}
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	for _, name := range []string{"1x", "a;drop", `a"b`, "a b", "é"} {
		if _, err := inbox.New(inbox.Options{Table: name}); !errors.Is(err, inbox.ErrBadTable) {
			t.Errorf("table %q: %v", name, err)
		}
	}
	db := ledger(t, backends()[0])
	ib, _ := inbox.New(inbox.Options{})
	ran := false
	for _, id := range []string{"", string(make([]byte, inbox.MaxIDBytes+1))} {
		if _, err := ib.Process(testContext(t), db, id, func(*sql.Tx) error { ran = true; return nil }); !errors.Is(err, inbox.ErrBadID) {
			t.Errorf("id of %d bytes: %v", len(id), err)
		}
	}
	if ran {
		t.Fatal("the handler ran for a bad id")
	}
}

func TestIDFrom(t *testing.T) {
	for _, tc := range []struct {
		name    string
		from    inbox.IDFrom
		headers map[string]string
		want    string
		wantErr error
	}{
		{name: "outbox header", headers: map[string]string{inbox.HeaderID: "01X"}, want: "01X"},
		{name: "named header", from: inbox.IDFrom{Header: "payment-id"}, headers: map[string]string{"payment-id": "p7", inbox.HeaderID: "01X"}, want: "p7"},
		{name: "missing", headers: map[string]string{"other": "x"}, wantErr: inbox.ErrNoID},
		{name: "offset fallback", from: inbox.IDFrom{OffsetFallback: true}, want: "pay/2/41"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hs []clientHeader
			for k, v := range tc.headers {
				hs = append(hs, clientHeader{Key: k, Value: []byte(v)})
			}
			got, err := tc.from.ID("pay", 2, 41, hs)
			if !errors.Is(err, tc.wantErr) || got != tc.want {
				t.Fatalf("got %q, %v; want %q, %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

type clientHeader = client.Header
