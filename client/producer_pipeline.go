package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// A partition's pipeline. Each partition's sender goroutine owns a
// window of flights: the batches from the first one not yet answered
// to the last one sent, at most ProducerOptions.MaxInFlight. Numbered
// batches (the producer's id, an epoch and the partition's sequence)
// go while the window has room; the server writes each only after the
// one before it (the Kafka idempotent producer's rules:
// docs/architecture.md, "Producers over the API"), so an out-of-order
// refusal means an earlier batch
// was not written yet, or will not be. The sender then waits until
// every call of the window has returned and sends the refused batches
// again, one at a time and in order; a repeat of a batch an earlier
// attempt wrote is answered with its original offsets. The window
// never holds more batches than the server remembers (five), so a
// repeat is always recognised.
//
// A batch that fails for good (after the client's retries) leaves a hole
// in the sequence that no later batch could follow: the partition starts
// a new epoch of its producer id at sequence 0, which the server takes
// and which fences every batch of the old epoch still on its way. The
// window's batches that were refused are numbered again in the new epoch;
// those that may have been written (an attempt's outcome was unknown)
// are not sent again, since in a new epoch a repeat would not be
// recognised: their records fail with ErrOutcomeUnknown.

// flight is one batch of a partition, from its first send until every
// record in it has its result.
type flight struct {
	recs []pendingRecord
	// id, epoch and seq are the batch's producer identity; seq is -1 for
	// a batch sent without one.
	id    int64
	epoch int16
	seq   int32
	// first: sent while every earlier batch of the partition was
	// answered, so a refusal as out of order cannot be a race with them.
	first bool
	state flightState
	// ambiguous: an attempt's outcome was unknown, so it may be written.
	ambiguous bool
	// The call's answer, set by its goroutine before it hands the flight
	// back on partQueue.answered; delivered when that goroutine gives the
	// records their results itself (a success: without waiting for the
	// sender, which only keeps the books). After the hand-off the sender
	// writes none of the flight's fields but state.
	res       []Result
	checked   bool
	err       error
	delivered bool
}

type flightState int

const (
	flightOut    flightState = iota // a call is out
	flightResend                    // to be sent again, in order
	flightDone                      // its records have their results
)

// pipe is one partition's pipeline state, touched only by its sender.
type pipe struct {
	// id and epoch number the partition's next batches, next is the
	// sequence of the next batch's first record.
	id    int64
	epoch int16
	next  int32
	// confirmed: a batch of id and epoch was written and checked, so the
	// partition knows the producer and sees a gap (until then, one batch
	// at a time: the server takes an unknown producer at any sequence).
	confirmed bool
	// window holds the flights from the first one not done, in order.
	window []*flight
	// out counts the flights with a call out.
	out int
	// restart asks for a new epoch once no call is out; newID for a new
	// producer id instead (the partition saw a higher epoch of this one).
	restart, newID bool
}

// numbered reports whether the producer numbers its batches.
func (p *Producer) numbered() bool { return p.sequenced && !p.unchecked.Load() }

// sender sends one partition's batches until the producer is closed and
// every record has its result.
func (p *Producer) sender(q *partQueue) {
	defer p.wg.Done()
	s := &pipe{id: p.id, epoch: p.epoch}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if s.restart && s.out == 0 {
			p.newEpoch(q, s)
		}
		wait := time.Duration(-1) // wait for an answer or a poke
		switch {
		case s.restart:
		case s.resending():
			if s.out == 0 {
				p.launch(q, s, s.window[0])
			}
		default:
			p.mu.Lock()
			if len(q.pending) == 0 && p.closed && len(s.window) == 0 {
				p.mu.Unlock()
				return
			}
			var send bool
			send, wait = p.due(q, s)
			if send {
				f := s.add(p, p.take(q))
				p.mu.Unlock()
				p.launch(q, s, f)
				continue
			}
			p.mu.Unlock()
		}
		var tc <-chan time.Time
		if wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			tc = timer.C
		}
		select {
		case f := <-q.answered:
			p.settle(q, s, f)
		case <-q.wake:
		case <-tc:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// due says whether q's next batch goes now, else how long its linger
// still runs (-1: until an answer or a poke). Call with mu held. A
// partition with nothing in flight sends at once; beside batches in
// flight, a batch goes once full or lingered (ProducerOptions.Linger).
func (p *Producer) due(q *partQueue, s *pipe) (bool, time.Duration) {
	n := len(q.pending)
	if n == 0 || len(s.window) >= p.room(q, s) {
		return false, -1
	}
	if len(s.window) == 0 || n >= p.opts.BatchRecords || q.bytes >= p.opts.BatchBytes || p.closed || q.flushTo > q.done {
		return true, 0
	}
	if wait := p.opts.Linger - time.Since(q.pending[0].at); wait > 0 {
		return false, wait
	}
	return true, 0
}

// room is how many flights the window may hold before q's next batch
// goes. Call with mu held and records pending.
func (p *Producer) room(q *partQueue, s *pipe) int {
	switch {
	case !p.numbered(), !s.confirmed:
		return 1
	case q.pending[0].rec.IdempotencyKey != "":
		return 1 // goes alone and unnumbered, after the window is answered
	case len(s.window) > 0 && s.window[0].seq < 0:
		return 1 // nothing goes beside an unnumbered batch
	}
	return p.opts.MaxInFlight
}

// resending reports whether the window holds a batch to send again.
func (s *pipe) resending() bool {
	for _, f := range s.window {
		if f.state == flightResend {
			return true
		}
	}
	return false
}

// add puts a new batch at the end of the window, numbered unless the
// producer does not number or the batch holds idempotency keys (take
// keeps those apart).
func (s *pipe) add(p *Producer, batch []pendingRecord) *flight {
	f := &flight{recs: batch, seq: -1}
	if p.numbered() && batch[0].rec.IdempotencyKey == "" {
		f.id, f.epoch, f.seq = s.id, s.epoch, s.next
		s.next = addSequence(s.next, len(batch))
	}
	s.window = append(s.window, f)
	return f
}

// addSequence is the sequence n records after seq, wrapping past
// MaxInt32 to 0 as Kafka's sequences do.
func addSequence(seq int32, n int) int32 {
	return int32((int64(seq) + int64(n)) % (math.MaxInt32 + 1))
}

// take removes the next batch from q. Call with mu held. A numbering
// producer keeps records with and without idempotency keys in separate
// batches.
func (p *Producer) take(q *partQueue) []pendingRecord {
	keyed := q.pending[0].rec.IdempotencyKey != ""
	split := p.numbered()
	n, size := 0, 0
	for n < len(q.pending) && n < p.opts.BatchRecords {
		r := &q.pending[n].rec
		s := len(r.Key) + len(r.Value)
		if n > 0 && (size+s > p.opts.BatchBytes || split && (r.IdempotencyKey != "") != keyed) {
			break
		}
		size += s
		n++
	}
	batch := q.pending[:n:n]
	q.pending = q.pending[n:]
	q.bytes -= size
	if len(q.pending) == 0 {
		q.pending = nil // let the backing array go
	}
	return batch
}

// launch sends f on a goroutine of its own, which hands it back on
// q.answered.
func (p *Producer) launch(q *partQueue, s *pipe, f *flight) {
	f.state, f.first = flightOut, s.window[0] == f
	s.out++
	if f.seq >= 0 && !p.numbered() {
		f.seq = -1 // the server stopped checking since it was numbered
	}
	part := q.part
	recs := make([]Record, len(f.recs))
	for i, b := range f.recs {
		recs[i] = b.rec
		recs[i].Partition = &part // the server must agree with our choice
	}
	var seq *logdv1.ProducerSequence
	if f.seq >= 0 {
		seq = &logdv1.ProducerSequence{ProducerId: f.id, ProducerEpoch: int32(f.epoch), BaseSequences: map[int32]int32{part: f.seq}}
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		// Close does not interrupt a batch: it is bounded by the client's
		// timeouts and retry policy.
		res, checked, err := p.c.produce(context.Background(), p.opts.Topic, recs, seq)
		f.res, f.checked, f.err, f.delivered = res, checked, err, err == nil
		q.answered <- f
		if err == nil {
			// After the hand-off, which readies the sender: the goroutine
			// waiting for a record, readied last, runs first.
			p.deliver(q, f, nil)
		}
	}()
}

// settle takes in the answer of f's call.
func (p *Producer) settle(q *partQueue, s *pipe, f *flight) {
	s.out--
	err := f.err
	switch {
	case err == nil:
		if f.seq >= 0 {
			if !f.checked {
				// A server of an earlier build: it wrote the batch
				// unjudged, and will so write the next ones.
				p.unchecked.Store(true)
			} else if f.id == s.id && f.epoch == s.epoch {
				s.confirmed = true
			}
		}
		f.state = flightDone // delivered by its call's goroutine
	case f.seq < 0:
		p.fail(q, f, err)
	case errors.Is(err, ErrOutOfOrderSequence):
		f.state = flightResend
		f.ambiguous = f.ambiguous || errors.Is(err, ErrOutcomeUnknown)
		if f.first {
			// Every batch before it was answered, so the partition's
			// state is not what this producer left there (a restore from
			// a backup taken before): start afresh.
			s.restart = true
		}
	case errors.Is(err, ErrInvalidProducerEpoch):
		p.fail(q, f, err)
		s.restart, s.newID = true, true
	default:
		p.fail(q, f, err)
		s.restart = true
	}
	n := 0
	for n < len(s.window) && s.window[n].state == flightDone {
		n++
	}
	copy(s.window, s.window[n:])
	clear(s.window[len(s.window)-n:])
	s.window = s.window[:len(s.window)-n]
}

// newEpoch starts the partition's next epoch once no call is out: the
// window's refused batches are numbered again from 0, those that may have
// been written fail.
func (p *Producer) newEpoch(q *partQueue, s *pipe) {
	var kept []*flight
	for _, f := range s.window {
		switch {
		case f.state == flightDone:
		case f.ambiguous:
			p.fail(q, f, fmt.Errorf("not sent again in a new producer epoch, where a repeat would be written twice: %w", f.err))
		default:
			kept = append(kept, f)
		}
	}
	if s.newID || s.epoch == math.MaxInt16 {
		id, epoch, err := p.c.initProducerID(context.Background(), p.opts.Topic)
		if err != nil {
			p.unchecked.Store(true) // go on unnumbered, one batch at a time
		} else {
			s.id, s.epoch = id, epoch
		}
	} else {
		s.epoch++
	}
	s.next, s.confirmed, s.restart, s.newID = 0, false, false, false
	for _, f := range kept {
		f.id, f.epoch, f.seq, f.state = s.id, s.epoch, s.next, flightResend
		s.next = addSequence(s.next, len(f.recs))
	}
	s.window = kept
}

// fail gives every record of f the error err; the sender calls it.
func (p *Producer) fail(q *partQueue, f *flight, err error) {
	p.deliver(q, f, err)
	f.state = flightDone
}

// deliver hands every record of f its result: err, or where f's answer
// put it. It leaves f's state to the sender (it may run on f's call's
// goroutine).
func (p *Producer) deliver(q *partQueue, f *flight, err error) {
	for i, b := range f.recs {
		r := ProduceResult{Record: b.rec, Err: err}
		if err == nil {
			// A numbered batch's duplicate is a repeat of this producer's
			// own batch: the record was written once.
			r.Partition, r.Offset, r.Duplicate = f.res[i].Partition, f.res[i].Offset, f.res[i].Duplicate && f.seq < 0
		}
		b.ch <- r
		<-p.slots
	}
	p.mu.Lock()
	q.done += int64(len(f.recs))
	close(p.progress)
	p.progress = make(chan struct{})
	p.mu.Unlock()
}
