package replication

import (
	"context"
	"math"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
)

// QueueClaimWait is QueueClaim with a long poll: while nothing is
// claimable it waits, up to wait, for an append to the topic or for the
// group's earliest lease or backoff to end, without proposing empty
// claims. It returns the first claim that delivers records or reports
// partitions at their in-flight cap, or the last one at the deadline.
func (b *Backend) QueueClaimWait(ctx context.Context, c backend.QueueClaim, wait time.Duration, admit func(context.Context) error) (backend.QueueClaimResult, error) {
	deadline := time.Now().Add(wait)
	groups, err := b.placedQueue(c.Topic)
	if err != nil {
		return backend.QueueClaimResult{}, err
	}
	if groups != nil {
		if err := b.checkClaim(fsm.QueueClaim(c)); err != nil {
			return backend.QueueClaimResult{}, err
		}
		return b.waitPlacedClaim(ctx, groups, c, deadline, admit)
	}
	for {
		if err := b.waitClaimable(ctx, c.Topic, c.Group, deadline); err != nil {
			return backend.QueueClaimResult{}, err
		}
		if admit != nil {
			if err := admit(ctx); err != nil {
				return backend.QueueClaimResult{}, err
			}
		}
		res, err := b.queueClaim(ctx, fsm.QueueClaim(c))
		if err != nil {
			return backend.QueueClaimResult{}, err
		}
		if len(res.Records) > 0 || len(res.AtCap) > 0 || !time.Now().Before(deadline) {
			return res, nil
		}
	}
}

// waitClaimable returns once a claim could deliver something, or at the
// deadline; it wakes on appends to the topic, when records of the group
// are offered again (a nack, a release) and at the group's earliest lease
// or backoff end.
func (b *Backend) waitClaimable(ctx context.Context, topic, name string, deadline time.Time) error {
	for {
		// The topic is read again at every wake: a growth of its
		// partitions wakes the old ones' waiters (fsm.CreatePartitions),
		// and the new partitions are watched from then on.
		t, err := b.FSM().Topic(topic)
		if err != nil {
			return err
		}
		// Subscribe before checking, so an append in between wakes us.
		chans := make([]<-chan struct{}, len(t.Partitions))
		for i, p := range t.Partitions {
			if p != nil { // nil: another data group's
				chans[i] = p.Changed()
			}
		}
		chans = append(chans, b.FSM().QueueReturned(topic, name))
		// The node's clock stamps the claim, so it decides what is due;
		// the wait itself is on the wall clock (the same one in production).
		now, nodeNow := time.Now(), b.Now()
		ok, wake, err := b.FSM().QueueClaimable(topic, name, nodeNow.UnixNano())
		if err != nil {
			return err
		}
		if ok || !now.Before(deadline) {
			return nil
		}
		until := deadline
		if wake != math.MaxInt64 {
			until = now.Add(time.Duration(wake - nodeNow.UnixNano()))
			if until.After(deadline) {
				until = deadline
			}
		}
		timer := time.NewTimer(time.Until(until))
		err = waitAny(ctx, chans, timer.C)
		timer.Stop()
		if err != nil {
			return err
		}
	}
}

// waitAny waits for one of the channels (nil ones never fire), the timer
// or ctx.
func waitAny(ctx context.Context, chans []<-chan struct{}, timer <-chan time.Time) error {
	if len(chans) == 1 {
		select {
		case <-chans[0]:
		case <-timer:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	// Fan in with one goroutine per partition; all end when this returns.
	done := make(chan struct{})
	woke := make(chan struct{}, 1)
	defer close(done)
	for _, c := range chans {
		go func() {
			select {
			case <-c:
				select {
				case woke <- struct{}{}:
				default:
				}
			case <-done:
			}
		}()
	}
	select {
	case <-woke:
	case <-timer:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}
