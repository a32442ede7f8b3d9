package membudget

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// ErrFull means an answer did not fit in the budget within its wait.
var ErrFull = errors.New("membudget: the answers in flight hold this node's answer memory budget")

// FullError is ErrFull with the budget's size and the key's cap.
type FullError struct {
	// Limit is the whole budget and PerKey the cap of one key (0: none),
	// in bytes; KeyFull says the key's cap, not the budget, held it back.
	Limit, PerKey int64
	KeyFull       bool
}

func (e *FullError) Error() string {
	if e.KeyFull {
		return fmt.Sprintf("%v: this client's answers in flight hold its share (%d of %d bytes)", ErrFull, e.PerKey, e.Limit)
	}
	return fmt.Sprintf("%v (%d bytes)", ErrFull, e.Limit)
}

// Unwrap makes errors.Is(err, ErrFull) hold.
func (e *FullError) Unwrap() error { return ErrFull }

// Budget counts the bytes of answers in flight. The zero value is not
// usable; call New.
type Budget struct {
	limit  int64 // <= 0: unbounded (still counted)
	perKey int64 // <= 0: no cap per key

	mu      sync.Mutex
	used    int64            // guarded by mu
	keyUsed map[string]int64 // guarded by mu; keys holding bytes only
	peak    int64            // guarded by mu: the most ever charged at once
	waiters []*waiter        // guarded by mu, in arrival order
	waited  int64            // guarded by mu: charges that had to wait
	refused int64            // guarded by mu: charges refused after waiting
}

type waiter struct {
	key   string
	n     int64
	ready chan struct{}
}

// New returns a budget of limit bytes (<= 0: unbounded, still counted),
// of which one key may hold at most perKey (<= 0: no cap per key).
func New(limit, perKey int64) *Budget {
	if limit > 0 && perKey > limit {
		perKey = limit
	}
	return &Budget{limit: limit, perKey: perKey, keyUsed: map[string]int64{}}
}

// Limit returns the budget's size (0: unbounded) and PerKey the cap of
// one key (0: none).
func (b *Budget) Limit() int64  { return max(b.limit, 0) }
func (b *Budget) PerKey() int64 { return max(b.perKey, 0) }

// MaxCharge is the most one charge may hold (the budget, or the key's cap
// when lower); 0: unbounded. A caller sizes what it builds to it.
func (b *Budget) MaxCharge() int64 {
	switch {
	case b.perKey > 0:
		return b.perKey
	case b.limit > 0:
		return b.limit
	}
	return 0
}

// Stats is what a Budget counted.
type Stats struct {
	// InUse is the bytes charged now, Peak the most ever charged at once.
	InUse, Peak int64
	// Waited counts charges that waited for room, Refused those that
	// failed after waiting.
	Waited, Refused int64
}

// Stats returns the budget's counts.
func (b *Budget) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Stats{InUse: b.used, Peak: b.peak, Waited: b.waited, Refused: b.refused}
}

// Acquire charges n bytes to key, waiting while they do not fit, at most
// wait (a negative wait: no bound) and while ctx lasts; n is cut to the
// budget (and to the key's cap), so a charge larger than the budget waits
// for an empty one. It fails with *FullError after wait, or with ctx's
// error, having charged nothing.
func (b *Budget) Acquire(ctx context.Context, key string, n int64, wait time.Duration) (*Charge, error) {
	n = max(n, 0)
	if b.limit > 0 {
		n = min(n, b.limit)
	}
	if b.perKey > 0 {
		n = min(n, b.perKey)
	}
	c := &Charge{b: b, key: key, n: n}
	b.mu.Lock()
	if len(b.waiters) == 0 && b.fits(key, n) {
		b.take(key, n)
		b.mu.Unlock()
		return c, nil
	}
	w := &waiter{key: key, n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.waited++
	b.mu.Unlock()
	var timeout <-chan time.Time
	if wait >= 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	var err error
	select {
	case <-w.ready:
		return c, nil
	case <-timeout:
	case <-ctx.Done():
		err = ctx.Err()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready: // granted meanwhile: give it back
		b.give(key, n)
	default:
		for i, x := range b.waiters {
			if x == w {
				b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
				break
			}
		}
	}
	b.grant() // the waiter gone may have held back others
	if err != nil {
		return nil, err
	}
	b.refused++
	return nil, &FullError{Limit: b.Limit(), PerKey: b.PerKey(), KeyFull: b.globalFits(n) && !b.keyFits(key, n)}
}

func (b *Budget) globalFits(n int64) bool { return b.limit <= 0 || b.used+n <= b.limit }
func (b *Budget) keyFits(key string, n int64) bool {
	return b.perKey <= 0 || b.keyUsed[key]+n <= b.perKey
}

// fits reports whether n more bytes of key fit; b.mu is held.
func (b *Budget) fits(key string, n int64) bool { return b.globalFits(n) && b.keyFits(key, n) }

// take charges n bytes to key; b.mu is held.
func (b *Budget) take(key string, n int64) {
	b.used += n
	b.peak = max(b.peak, b.used)
	if b.perKey > 0 && n > 0 {
		b.keyUsed[key] += n
	}
}

// give returns n bytes of key; b.mu is held.
func (b *Budget) give(key string, n int64) {
	b.used -= n
	if b.perKey > 0 && n > 0 {
		if b.keyUsed[key] -= n; b.keyUsed[key] <= 0 {
			delete(b.keyUsed, key)
		}
	}
}

// grant admits waiters in arrival order while they fit; b.mu is held. One
// that does not fit the budget stops the others (first come, first
// served: a large answer is not overtaken for ever by small ones); one
// held back by its key's cap only does not.
func (b *Budget) grant() {
	for i := 0; i < len(b.waiters); {
		w := b.waiters[i]
		if !b.globalFits(w.n) {
			return
		}
		if !b.keyFits(w.key, w.n) {
			i++
			continue
		}
		b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
		b.take(w.key, w.n)
		close(w.ready)
	}
}

// Charge is bytes one answer holds in a Budget.
type Charge struct {
	b   *Budget
	key string
	n   int64 // owned by the charge's goroutine
}

// Bytes returns what the charge holds now.
func (c *Charge) Bytes() int64 {
	if c == nil {
		return 0
	}
	return c.n
}

// Trim gives back what the charge holds above n: the answer was built, and
// holds n bytes. A nil charge does nothing.
func (c *Charge) Trim(n int64) {
	if c == nil || n >= c.n {
		return
	}
	n = max(n, 0)
	c.b.mu.Lock()
	c.b.give(c.key, c.n-n)
	c.n = n
	c.b.grant()
	c.b.mu.Unlock()
}

// Release gives back the whole charge; again, or on nil, it does nothing.
func (c *Charge) Release() { c.Trim(0) }

// PrincipalKey is the key of an authenticated principal's answers, and
// AddressKey that of an anonymous client's, by its address (host:port or
// host): the front ends name the same client the same way, so its cap
// holds across them.
func PrincipalKey(name string) string { return "principal:" + name }

// AddressKey is described at PrincipalKey.
func AddressKey(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	return "ip:" + addr
}
