package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/partition"
)

// Producer defaults.
const (
	DefaultBatchRecords  = 500
	DefaultBatchBytes    = 1 << 20
	DefaultLinger        = time.Millisecond // beside batches in flight only: see ProducerOptions.Linger
	DefaultBufferRecords = 10000
	DefaultMaxInFlight   = 5
)

// MaxBatchesInFlight is the most batches a Producer keeps in flight per
// partition: a partition remembers an idempotent producer's last five
// batches, and a batch sent again is recognised as a duplicate only among
// them (docs/kafka.md, "Idempotent producers"; Kafka's clients keep the
// same bound).
const MaxBatchesInFlight = 5

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
	// others, while the partition has batches in flight, before its batch
	// goes beside them anyway. A partition with nothing in flight sends at
	// once, so a lone record is never held back; under load the records
	// that arrive while batches are in flight gather for up to Linger, or
	// until the window empties, so a busy producer still fills batches.
	// Default: DefaultLinger (1 ms, chosen by measurement:
	// docs/performance.md, "The batching producer"); a negative Linger is
	// none: a batch goes beside the others as soon as there is room,
	// which makes more and smaller calls.
	Linger time.Duration
	// BufferRecords bounds the records sent but not yet answered, over all
	// partitions; the buffer never grows past it. Default:
	// DefaultBufferRecords.
	BufferRecords int
	// FailWhenFull makes Send fail with ErrProducerFull when the buffer is
	// full; by default Send blocks until there is room or its context ends.
	FailWhenFull bool
	// MaxInFlight bounds the batches of a partition sent and not yet all
	// answered, 1 to MaxBatchesInFlight. Default: DefaultMaxInFlight. Above 1
	// the producer takes a producer id (InitProducerId) and numbers its
	// batches per partition, and the server checks the numbers, so
	// batches are written in order and a batch sent again is not written
	// twice (see Producer). With 1, or when the server cannot check
	// (InitProducerId unimplemented, refused, or a server of an earlier
	// build that ignores the numbers), a partition has one batch in
	// flight at a time, without a producer id.
	MaxInFlight int
}

// ProduceResult is the outcome of one record sent by a Producer.
type ProduceResult struct {
	// Record is the record as sent.
	Record Record
	// Partition and Offset are where it was written. Duplicate as in
	// Result, for a record with an IdempotencyKey; a batch the producer
	// sent again because an answer was lost, and that the server found
	// already written, is reported as written once, at its original
	// offsets, not as a duplicate. Meaningless when Err is set.
	Partition int32
	Offset    int64
	Duplicate bool
	// Err is why the call failed after the client's retries. When it
	// matches ErrOutcomeUnknown the record may have been written (a reply
	// was lost); otherwise it was not.
	Err error
}

// Producer sends records asynchronously, batched per partition by size and
// linger time (a partition with nothing in flight sends at once; records
// batch while its batches are in flight). It knows the partition of every record
// before sending it: Record.Partition if set, murmur2 of the key as the
// server computes it (partition.ForKey) otherwise, and for records with
// neither, a "sticky" partition that moves on after BatchRecords of them
// (so keyless records fill batches instead of spreading one record per
// partition, and still spread evenly).
//
// Order: the records of a partition are written in the order they were
// sent, across retries and leader changes. A partition keeps up to
// ProducerOptions.MaxInFlight batches in flight, numbered as an idempotent producer's
// (ProduceRequest.producer): the server writes a batch only if it follows
// the producer's last one on the partition, answers a batch it already
// wrote (a retry after a lost answer) with its original offsets, and
// refuses a gap (ErrOutOfOrderSequence). A batch that failed with a
// retryable error, or was refused because one before it had not been
// written yet, is sent again with the ones after it, in order, once all
// of them are answered. A partition's first batch of a producer id goes
// alone: the server takes a producer it does not know at any sequence,
// so only once the partition knows it can a gap be seen.
//
// A batch that fails after the client's retries (its RetryPolicy) fails
// every record in it, and the partition starts a new producer epoch
// (fencing any of its earlier batches still on their way); the batches
// after it are sent again in the new epoch, except those that may have
// been written already, whose records fail with ErrOutcomeUnknown.
// Later batches are still sent. Every retryable failure is retried, since
// the server recognises a repeated batch. Batches holding records with an
// IdempotencyKey go alone, without a producer id (the key makes their
// retries safe).
//
// Without a producer id (MaxInFlight 1, or a server that cannot check the
// numbers), a partition has one batch in flight at a time, retried whole
// by Client.Produce, and records are retried after ambiguous failures
// only when each carries an IdempotencyKey.
//
// The partition count is read once, by NewProducer. A Producer is safe for
// concurrent use.
type Producer struct {
	c     *Client
	opts  ProducerOptions
	parts int32
	slots chan struct{} // one token per buffered record: the memory bound

	// id is the producer id from NewProducer's InitProducerId, epoch its
	// epoch; sequenced says the producer numbers its batches (it has an
	// id and MaxInFlight is above 1).
	id        int64
	epoch     int16
	sequenced bool
	// unchecked is set once an answer says the server did not check a
	// batch's producer identity (a build before it could): from then on
	// batches go without one, one per partition at a time.
	unchecked atomic.Bool

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
	// answered receives the sender's flights whose calls returned.
	answered chan *flight
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
	if opts.BatchRecords < 0 || opts.BatchBytes < 0 || opts.BufferRecords < 0 || opts.MaxInFlight < 0 {
		return nil, fmt.Errorf("producer options: negative size, time or count")
	}
	if opts.MaxInFlight > MaxBatchesInFlight {
		return nil, fmt.Errorf("producer options: %d batches in flight per partition; at most %d", opts.MaxInFlight, MaxBatchesInFlight)
	}
	if opts.MaxInFlight == 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	switch {
	case opts.Linger == 0:
		opts.Linger = DefaultLinger
	case opts.Linger < 0:
		opts.Linger = 0
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
	p := &Producer{
		c: c, opts: opts, parts: n,
		slots:    make(chan struct{}, opts.BufferRecords),
		closing:  make(chan struct{}),
		queues:   make(map[int32]*partQueue),
		progress: make(chan struct{}),
	}
	if opts.MaxInFlight > 1 {
		p.id, p.epoch, err = c.initProducerID(ctx, opts.Topic)
		switch {
		case err == nil:
			p.sequenced = true
		case !cannotNumber(err):
			return nil, err
		}
	}
	return p, nil
}

// cannotNumber reports whether InitProducerId failed because the server
// cannot serve producer ids at all: a build without them
// (UNIMPLEMENTED), a cluster a member's build keeps below the feature
// level (FAILED_PRECONDITION), or a principal without the right. The
// producer then sends without one.
func cannotNumber(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeUnimplemented, connect.CodeFailedPrecondition, connect.CodePermissionDenied:
		return true
	}
	return false
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
		q = &partQueue{part: part, wake: make(chan struct{}, 1), answered: make(chan *flight, MaxBatchesInFlight)}
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
