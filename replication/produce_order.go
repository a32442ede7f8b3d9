package replication

import (
	"context"
	"math"
	"sync"
	"time"
)

// An idempotent producer that keeps several batches of a partition in
// flight (the Go client's Producer, ProduceRequest.producer) sends each
// over its own call, and calls race between the connection that carries
// them and the coalescer: a batch that overtakes the one before it
// reaches the state machine out of sequence and is refused, and the
// producer must send it (and those after it) again. So the node that
// proposes holds a batch that arrives ahead of its producer's last batch
// of the partition until that one is queued for Raft, for a short while:
// the order the producer sent in is then the order of the log. This is
// the node's own soft state, not replicated: the state machine still
// decides (replication/fsm, producers.go), and a batch held too long goes
// anyway and is judged there. Kafka gets the same from handling a
// connection's requests one at a time.
//
// orderWait bounds the hold. The batch before arrives within
// microseconds to a few milliseconds unless it was lost or refused, in
// which case the held batch is refused at apply after the wait, as it
// would have been without it.
const orderWait = 50 * time.Millisecond

// orderForget is how long a producer's partition is remembered after its
// last batch queued: batches in flight together arrive within it, and a
// node that leads again after another led meanwhile does not hold the
// next batch for a predecessor it will never see.
const orderForget = time.Second

// maxOrderSlots bounds the producers' partitions the node remembers;
// past it, those without a held batch are forgotten (a forgotten one only
// loses the hold for its next batch).
const maxOrderSlots = 10_000

// produceOrder is the node's record of the last batch of each producer's
// partitions it queued for Raft.
type produceOrder struct {
	mu sync.Mutex
	// slots is guarded by mu.
	slots map[orderKey]*orderSlot
}

// orderKey is one producer's partition.
type orderKey struct {
	topic     string
	partition int32
	id        int64
}

// orderSlot is the last batch a producer's partition queued: its epoch,
// the sequence after its last record, when it was queued, and a channel
// closed when another is queued. held counts the batches waiting on it.
type orderSlot struct {
	epoch int16
	next  int32
	at    time.Time
	moved chan struct{}
	held  int
}

// wait holds a batch of k at epoch whose first sequence is first while it
// is ahead of the last batch of k queued in the same epoch, at most
// orderWait and while ctx lasts.
func (o *produceOrder) wait(ctx context.Context, k orderKey, epoch int16, first int32) {
	var timer *time.Timer
	o.mu.Lock()
	defer o.mu.Unlock()
	for {
		s := o.slots[k]
		if s == nil || s.epoch != epoch || !seqAhead(s.next, first) || time.Since(s.at) > orderForget {
			return
		}
		if timer == nil {
			timer = time.NewTimer(orderWait)
			defer timer.Stop()
		}
		s.held++
		moved := s.moved
		o.mu.Unlock()
		expired := false
		select {
		case <-moved:
		case <-timer.C:
			expired = true
		case <-ctx.Done():
			expired = true
		}
		o.mu.Lock()
		s.held--
		if expired {
			return
		}
	}
}

// queued notes a batch of k at epoch, sequences first to last, queued for
// Raft: the batch after it may go.
func (o *produceOrder) queued(k orderKey, epoch int16, first, last int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.slots[k]
	switch {
	case s == nil:
		if o.slots == nil {
			o.slots = map[orderKey]*orderSlot{}
		}
		if len(o.slots) >= maxOrderSlots {
			for key, old := range o.slots {
				if old.held == 0 {
					delete(o.slots, key)
				}
			}
		}
		s = &orderSlot{moved: make(chan struct{})}
		o.slots[k] = s
	case epoch < s.epoch:
		return // fenced at apply
	case epoch == s.epoch && first != s.next && !seqAhead(s.next, first):
		return // a repeat of an earlier batch: the order stays
	}
	s.epoch, s.next, s.at = epoch, int32((int64(last)+1)%(math.MaxInt32+1)), time.Now()
	close(s.moved)
	s.moved = make(chan struct{})
}

// seqAhead reports whether sequence first comes after next, by less than
// half the sequence space (sequences wrap past MaxInt32 to 0).
func seqAhead(next, first int32) bool {
	d := (int64(first) - int64(next) + math.MaxInt32 + 1) % (math.MaxInt32 + 1)
	return d > 0 && d < 1<<30
}
