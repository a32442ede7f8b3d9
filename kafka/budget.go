package kafka

import (
	"context"
	"sync"
)

// budget is the memory budget of requests being read or handled: a
// request's size is charged before its body is read and released once its
// response is written. Unlike the Connect API's budget, which refuses a
// request that does not fit, this one makes the reader wait: a Kafka
// client cannot be told "retry later" before its request is read, and a
// reader that stops reading holds the client back through TCP.
type budget struct {
	limit int64 // <= 0: unbounded (still counted)

	mu      sync.Mutex
	used    int64           // guarded by mu
	waiters []*budgetWaiter // guarded by mu, in arrival order
}

type budgetWaiter struct {
	n     int64
	ready chan struct{}
}

// acquire charges n bytes, waiting while they do not fit; a charge larger
// than the whole budget waits for an empty one. It fails only when ctx
// ends, having charged nothing.
func (b *budget) acquire(ctx context.Context, n int64) error {
	b.mu.Lock()
	if b.fits(n) && len(b.waiters) == 0 {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		select {
		case <-w.ready: // granted meanwhile: give it back
			b.used -= n
			b.grant()
		default:
			for i, x := range b.waiters {
				if x == w {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
			b.grant() // the waiter removed may have blocked smaller ones
		}
		return ctx.Err()
	}
}

// release gives n bytes back and wakes the waiters that now fit, in order.
func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.grant()
	b.mu.Unlock()
}

// fits reports whether n more bytes fit; b.mu is held.
func (b *budget) fits(n int64) bool {
	return b.limit <= 0 || b.used+n <= b.limit || b.used == 0
}

// grant admits waiters from the head of the queue while they fit; b.mu is
// held. First come, first served: a large request is not overtaken for
// ever by small ones.
func (b *budget) grant() {
	for len(b.waiters) > 0 && b.fits(b.waiters[0].n) {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.used += w.n
		close(w.ready)
	}
}

// inUse returns the bytes charged now.
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
