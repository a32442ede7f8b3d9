package membudget

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name          string
		limit, perKey int64
		// held are charges taken first (key, bytes); then key asks n.
		held    map[string]int64
		key     string
		n       int64
		wantErr bool
		keyFull bool
		got     int64 // bytes charged when it fits
	}{
		{name: "fits", limit: 100, n: 60, key: "a", got: 60},
		{name: "cut to the budget", limit: 100, n: 1000, key: "a", got: 100},
		{name: "cut to the key's cap", limit: 100, perKey: 50, n: 80, key: "a", got: 50},
		{name: "full", limit: 100, held: map[string]int64{"b": 70}, key: "a", n: 40, wantErr: true},
		{name: "key full", limit: 100, perKey: 50, held: map[string]int64{"a": 30}, key: "a", n: 30, wantErr: true, keyFull: true},
		{name: "other key fits", limit: 100, perKey: 50, held: map[string]int64{"a": 50}, key: "b", n: 50, got: 50},
		{name: "unbounded", limit: 0, held: map[string]int64{"b": 1 << 40}, key: "a", n: 1 << 40, got: 1 << 40},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := New(tc.limit, tc.perKey)
			for k, n := range tc.held {
				if _, err := b.Acquire(ctx, k, n, 0); err != nil {
					t.Fatal(err)
				}
			}
			c, err := b.Acquire(ctx, tc.key, tc.n, time.Millisecond)
			var fe *FullError
			switch {
			case tc.wantErr && (!errors.As(err, &fe) || !errors.Is(err, ErrFull) || fe.KeyFull != tc.keyFull):
				t.Fatalf("err %v, want a FullError with KeyFull %v", err, tc.keyFull)
			case !tc.wantErr && err != nil:
				t.Fatal(err)
			case !tc.wantErr && c.Bytes() != tc.got:
				t.Fatalf("charged %d, want %d", c.Bytes(), tc.got)
			}
			if tc.wantErr && b.Stats().Refused != 1 {
				t.Fatalf("refused %d, want 1", b.Stats().Refused)
			}
		})
	}
}

// TestBudgetWaitsAndBounds: many charges at once never hold more than the
// budget; those that do not fit wait, in order, and get in as others are
// trimmed and released; at the end nothing is held.
func TestBudgetWaitsAndBounds(t *testing.T) {
	b := New(1000, 0)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			c, err := b.Acquire(context.Background(), "k", int64(100+i*10), time.Minute)
			if err != nil {
				t.Error(err)
				return
			}
			c.Trim(50)
			time.Sleep(time.Millisecond)
			c.Release()
			c.Release()
		})
	}
	wg.Wait()
	st := b.Stats()
	if st.Peak > 1000 || st.InUse != 0 || st.Waited == 0 {
		t.Fatalf("stats %+v: want peak <= 1000, nothing in use, some waits", st)
	}
}

// TestBudgetCancel: a waiter whose caller gives up charges nothing and
// lets the next in line in.
func TestBudgetCancel(t *testing.T) {
	b := New(100, 0)
	first, _ := b.Acquire(context.Background(), "a", 100, 0)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, "b", 100, time.Minute)
		errc <- err
	}()
	for b.Stats().Waited == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	first.Release()
	if st := b.Stats(); st.InUse != 0 || st.Refused != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestBudgetOrder: a charge that does not fit holds back the later ones
// that would (first come, first served); a charge larger than the budget
// waits for an empty one; a negative wait waits while ctx lasts.
func TestBudgetOrder(t *testing.T) {
	b := New(100, 0)
	ctx := context.Background()
	first, err := b.Acquire(ctx, "", 60, -1)
	if err != nil {
		t.Fatal(err)
	}
	granted := make(chan *Charge, 2)
	queue := func(n int64, queued int64) {
		go func() {
			if c, err := b.Acquire(ctx, "", n, -1); err == nil {
				granted <- c
			}
		}()
		for b.Stats().Waited < queued {
			time.Sleep(time.Millisecond)
		}
	}
	queue(50, 1) // does not fit beside 60
	queue(10, 2) // would fit, but waits its turn
	if got := b.Stats().InUse; got != 60 {
		t.Fatalf("in use %d while both wait; want 60", got)
	}
	first.Release()
	a, c := <-granted, <-granted
	if a.Bytes()+c.Bytes() != 60 {
		t.Fatalf("granted %d and %d; want 50 and 10", a.Bytes(), c.Bytes())
	}
	a.Release()
	c.Release()
	big, err := b.Acquire(ctx, "", 500, -1)
	if err != nil || b.Stats().InUse != 100 {
		t.Fatalf("oversized charge on an empty budget: %v, in use %d", err, b.Stats().InUse)
	}
	big.Release()
}
