package replication

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestProduceOrderHolds: a producer's batch that arrives ahead of the one
// before it waits until that one is queued; a batch in sequence, a repeat,
// another epoch or an unknown producer's batch goes at once; a batch
// whose predecessor never comes goes after orderWait.
func TestProduceOrderHolds(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var o produceOrder
	k := orderKey{topic: "t", partition: 1, id: 7}
	o.wait(ctx, k, 0, 40) // unknown: at once
	o.queued(k, 0, 0, 9)  // next is 10

	done := make(chan struct{})
	go func() {
		o.wait(ctx, k, 0, 20) // ahead of 10
		close(done)
	}()
	for held := 0; held == 0; {
		o.mu.Lock()
		held = o.slots[k].held
		o.mu.Unlock()
		select {
		case <-done:
			t.Fatal("a batch ahead of the one before went at once")
		case <-ctx.Done():
			t.Fatal("never held")
		case <-time.After(time.Millisecond):
		}
	}
	o.queued(k, 0, 10, 19) // the one before: the held batch goes
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the held batch never went")
	}

	for _, tc := range []struct {
		name  string
		epoch int16
		first int32
	}{
		{name: "in sequence", first: 20},
		{name: "a repeat", first: 10},
		{name: "another epoch", epoch: 1, first: 0},
	} {
		start := time.Now()
		o.wait(ctx, k, tc.epoch, tc.first)
		if el := time.Since(start); el >= orderWait {
			t.Errorf("%s: held %v", tc.name, el)
		}
	}
	// A repeat queued again leaves the order where it was.
	o.queued(k, 0, 10, 19)
	o.queued(k, 0, 20, 29)
	o.queued(k, 0, 10, 19)
	if next := o.slots[k].next; next != 30 {
		t.Fatalf("next %d after a repeat, want 30", next)
	}

	start := time.Now()
	o.wait(ctx, k, 0, 50) // the batch before (30) never comes
	if el := time.Since(start); el < orderWait {
		t.Errorf("held %v, want orderWait %v", el, orderWait)
	}
}

// TestSeqAhead: sequences wrap past MaxInt32 to 0.
func TestSeqAhead(t *testing.T) {
	for _, tc := range []struct {
		next, first int32
		want        bool
	}{
		{10, 11, true},
		{10, 10, false},
		{10, 9, false},
		{math.MaxInt32, 0, true},
		{math.MaxInt32 - 1, 3, true},
		{3, math.MaxInt32, false},
	} {
		if got := seqAhead(tc.next, tc.first); got != tc.want {
			t.Errorf("seqAhead(%d, %d) = %v", tc.next, tc.first, got)
		}
	}
}
