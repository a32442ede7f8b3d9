package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/logd-dev/logd/partition"
)

// Producer defaults.
const (
	DefaultBatchRecords  = 500
	DefaultBatchBytes    = 1 << 20
	DefaultLinger        = 0 // none: see ProducerOptions.Linger
	DefaultBufferRecords = 10000
)

var (
	// ErrProducerClosed: Send on a closed Producer.
	ErrProducerClosed = errors.New("logd: producer closed")
	// ErrProducerFull: Send found the buffer full and the producer was set
	// to fail rather than block (ProducerOptions.FailWhenFull).
	ErrProducerFull = errors.New("logd: producer buffer full")
)

// ProducerOptions configure a Producer.
type ProducerOptions struct {
	// Topic receives every record. Required.
	Topic string
	// BatchRecords sends a partition's batch once it holds this many
	// records. Default: DefaultBatchRecords.
	BatchRecords int
	// BatchBytes sends a partition's batch once its keys and values reach
	// this many bytes. Default: DefaultBatchBytes.
	BatchBytes int
	// Linger is how long a partition's first pending record waits for
	// others before its batch is sent anyway. Default: DefaultLinger, no
	// linger: a partition with no batch in flight sends at once, and the
	// records that arrive while its batch is in flight wait for it and go
	// together in the next batch, so a busy producer still fills batches
	// while a lone record is not held back (docs/performance.md, "The
	// batching producer"). A linger trades latency for fewer, fuller
	// calls.
	Linger time.Duration
	// BufferRecords bounds the records sent but not yet answered, over all
	// partitions; the buffer never grows past it. Default:
	// DefaultBufferRecords.
	BufferRecords int
	// FailWhenFull makes Send fail with ErrProducerFull when the buffer is
	// full; by default Send blocks until there is room or its context ends.
	FailWhenFull bool
}

// ProduceResult is the outcome of one record sent by a Producer.
type ProduceResult struct {
	// Record is the record as sent.
	Record Record
	// Partition and Offset are where it was written; Duplicate as in
	// Result. Meaningless when Err is set.
	Partition int32
	Offset    int64
	Duplicate bool
	// Err is why the call failed after the client's retries. When it
	// matches ErrOutcomeUnknown the record may have been written (a reply
	// was lost); otherwise it was not.
	Err error
}

// Producer sends records asynchronously, batched per partition by size and
// linger time (none by default: records batch while their partition's
// previous batch is in flight). It knows the partition of every record
// before sending it: Record.Partition if set, murmur2 of the key as the
// server computes it (partition.ForKey) otherwise, and for records with
// neither, a "sticky" partition that moves on after BatchRecords of them
// (so keyless records fill batches instead of spreading one record per
// partition, and still spread evenly).
//
// Order: each partition has at most one batch in flight, and a batch is
// retried whole (Client.Produce, under the client's RetryPolicy), so the
// records of a partition are written in the order they were sent. A batch
// that fails after its retries fails every record in it; later batches are
// still sent. Records are retried after ambiguous failures only when each
// carries an IdempotencyKey (see Client.Produce).
//
// The partition count is read once, by NewProducer. A Producer is safe for
// concurrent use.
type Producer struct {
	c     *Client
	opts  ProducerOptions
	parts int32
	slots chan struct{} // one token per buffered record: the memory bound

	closing chan struct{} // closed by Close: blocked Sends give up
	wg      sync.WaitGroup

	mu sync.Mutex
	// Guarded by mu:
	closed bool
	queues map[int32]*partQueue
	sticky int32
	// stuck counts the keyless records given the sticky partition since
	// it last moved.
	stuck    int
	progress chan struct{} // closed and replaced whenever a batch completes
}

// partQueue is one partition's pending records and its sender's state.
type partQueue struct {
	part int32
	wake chan struct{} // cap 1: something changed for the sender
	// Guarded by Producer.mu:
	pending []pendingRecord
	bytes   int
	sent    int64 // records ever queued
	done    int64 // records answered
	flushTo int64 // send without lingering until done reaches it
}

type pendingRecord struct {
	rec Record
	at  time.Time
	ch  chan ProduceResult
}

// NewProducer returns a producer of opts.Topic. It reads the topic's
// partition count (DescribeTopic) and starts no goroutine until the first
// Send; Close stops those it starts.
func (c *Client) NewProducer(ctx context.Context, opts ProducerOptions) (*Producer, error) {
	if opts.Topic == "" {
		return nil, fmt.Errorf("producer options: topic is required")
	}
	if opts.BatchRecords < 0 || opts.BatchBytes < 0 || opts.Linger < 0 || opts.BufferRecords < 0 {
		return nil, fmt.Errorf("producer options: negative size or time")
	}
	if opts.BatchRecords == 0 {
		opts.BatchRecords = DefaultBatchRecords
	}
	if opts.BatchBytes == 0 {
		opts.BatchBytes = DefaultBatchBytes
	}
	if opts.BufferRecords == 0 {
		opts.BufferRecords = DefaultBufferRecords
	}
	d, err := c.DescribeTopic(ctx, opts.Topic)
	if err != nil {
		return nil, err
	}
	n := d.Topic.Partitions
	if n < 1 {
		return nil, fmt.Errorf("topic %q has no partitions", opts.Topic)
	}
	return &Producer{
		c: c, opts: opts, parts: n,
		slots:    make(chan struct{}, opts.BufferRecords),
		closing:  make(chan struct{}),
		queues:   make(map[int32]*partQueue),
		progress: make(chan struct{}),
	}, nil
}

// Partitions returns the topic's partition count, as read by NewProducer.
func (p *Producer) Partitions() int32 { return p.parts }

// Send queues a record and returns the channel its result will arrive on
// (buffered: nobody has to read it). When the buffer is full it blocks
// until there is room, ctx ends or the producer closes, or fails at once
// with ErrProducerFull if FailWhenFull is set. A record with a Partition
// outside the topic fails with ErrUnknownPartition.
func (p *Producer) Send(ctx context.Context, r Record) (<-chan ProduceResult, error) {
	if r.Partition != nil && (*r.Partition < 0 || *r.Partition >= p.parts) {
		return nil, fmt.Errorf("produce to %q: partition %d of %d: %w", p.opts.Topic, *r.Partition, p.parts, ErrUnknownPartition)
	}
	if p.opts.FailWhenFull {
		select {
		case p.slots <- struct{}{}:
		default:
			return nil, ErrProducerFull
		}
	} else {
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.closing:
			return nil, ErrProducerClosed
		}
	}
	ch := make(chan ProduceResult, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		<-p.slots
		return nil, ErrProducerClosed
	}
	part := p.partitionOf(r)
	q := p.queue(part)
	q.pending = append(q.pending, pendingRecord{rec: r, at: time.Now(), ch: ch})
	q.bytes += len(r.Key) + len(r.Value)
	q.sent++
	if len(q.pending) == 1 || len(q.pending) >= p.opts.BatchRecords || q.bytes >= p.opts.BatchBytes {
		q.poke() // arm the linger timer, or send now
	}
	return ch, nil
}

// partitionOf chooses the record's partition. Call with mu held.
func (p *Producer) partitionOf(r Record) int32 {
	switch {
	case r.Partition != nil:
		return *r.Partition
	case r.Key != nil:
		return partition.ForKey(r.Key, p.parts)
	}
	// Keyless records stick to one partition for a batch's worth of
	// records, then move on: they fill batches, and spread evenly.
	part := p.sticky
	if p.stuck++; p.stuck >= p.opts.BatchRecords {
		p.sticky, p.stuck = (p.sticky+1)%p.parts, 0
	}
	return part
}

// queue returns a partition's queue, starting its sender on first use.
// Call with mu held.
func (p *Producer) queue(part int32) *partQueue {
	q, ok := p.queues[part]
	if !ok {
		q = &partQueue{part: part, wake: make(chan struct{}, 1)}
		p.queues[part] = q
		p.wg.Add(1)
		go p.sender(q)
	}
	return q
}

func (q *partQueue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// sender sends one partition's batches, one at a time, until the producer
// is closed and the queue is empty.
func (p *Producer) sender(q *partQueue) {
	defer p.wg.Done()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		p.mu.Lock()
		var wait time.Duration
		for {
			n := len(q.pending)
			if n == 0 && p.closed {
				p.mu.Unlock()
				return
			}
			if n >= p.opts.BatchRecords || q.bytes >= p.opts.BatchBytes ||
				n > 0 && (p.closed || q.flushTo > q.done) {
				break
			}
			wait = -1 // nothing pending: wait for a poke
			if n > 0 {
				if wait = p.opts.Linger - time.Since(q.pending[0].at); wait <= 0 {
					break
				}
			}
			p.mu.Unlock()
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
			case <-q.wake:
			case <-tc:
			}
			if timer != nil {
				timer.Stop()
			}
			p.mu.Lock()
		}
		batch := p.take(q)
		p.mu.Unlock()
		p.send(q, batch)
	}
}

// take removes the next batch from q. Call with mu held.
func (p *Producer) take(q *partQueue) []pendingRecord {
	n, size := 0, 0
	for n < len(q.pending) && n < p.opts.BatchRecords {
		s := len(q.pending[n].rec.Key) + len(q.pending[n].rec.Value)
		if n > 0 && size+s > p.opts.BatchBytes {
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

// send produces one batch (retried by the client) and delivers its results.
func (p *Producer) send(q *partQueue, batch []pendingRecord) {
	recs := make([]Record, len(batch))
	part := q.part
	for i, b := range batch {
		recs[i] = b.rec
		recs[i].Partition = &part // the server must agree with our choice
	}
	// Close does not interrupt a batch: it is bounded by the client's
	// timeouts and retry policy.
	res, err := p.c.Produce(context.Background(), p.opts.Topic, recs)
	for i, b := range batch {
		r := ProduceResult{Record: b.rec, Err: err}
		if err == nil {
			r.Partition, r.Offset, r.Duplicate = res[i].Partition, res[i].Offset, res[i].Duplicate
		}
		b.ch <- r
		<-p.slots
	}
	p.mu.Lock()
	q.done += int64(len(batch))
	close(p.progress)
	p.progress = make(chan struct{})
	p.mu.Unlock()
}

// Flush sends every record queued before the call without waiting for
// linger, and waits until they all have results or ctx ends.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	targets := make(map[*partQueue]int64, len(p.queues))
	for _, q := range p.queues {
		if q.sent > q.done {
			targets[q] = q.sent
			q.flushTo = max(q.flushTo, q.sent)
			q.poke()
		}
	}
	p.mu.Unlock()
	for {
		p.mu.Lock()
		for q, t := range targets {
			if q.done >= t {
				delete(targets, q)
			}
		}
		progress := p.progress
		p.mu.Unlock()
		if len(targets) == 0 {
			return nil
		}
		select {
		case <-progress:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close refuses further Sends, sends every queued record, waits for their
// results and stops every goroutine the producer started. It is
// idempotent; it does not close the Client.
func (p *Producer) Close() error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.closing)
		for _, q := range p.queues {
			q.poke()
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}
