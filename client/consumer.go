package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// Special start offsets for ConsumerOptions.Offset, resolved against the
// partition's bounds on the consumer's first poll.
const (
	// OffsetLatest starts at the partition's end: only new records.
	OffsetLatest int64 = -1
	// OffsetEarliest starts at the partition's log start.
	OffsetEarliest int64 = -2
)

// DefaultConsumerMaxWait is the long-poll wait of a Consumer whose MaxWait
// is zero.
const DefaultConsumerMaxWait = 5 * time.Second

// ConsumerOptions configure a Consumer.
type ConsumerOptions struct {
	Topic     string
	Partition int32
	// Offset is the first offset to read, or OffsetEarliest/OffsetLatest.
	// The zero value starts at offset 0.
	Offset int64
	// MaxWait is how long each fetch waits for new records.
	// Default: DefaultConsumerMaxWait.
	MaxWait time.Duration
	// MaxBytes and MaxRecords bound each fetch; see FetchRequest.
	MaxBytes   int32
	MaxRecords int32
}

// Validate reports options that cannot be used.
func (o ConsumerOptions) Validate() error {
	var errs []error
	if o.Topic == "" {
		errs = append(errs, errors.New("consumer: topic is empty"))
	}
	if o.Partition < 0 {
		errs = append(errs, fmt.Errorf("consumer: partition %d is negative", o.Partition))
	}
	if o.Offset < OffsetEarliest {
		errs = append(errs, fmt.Errorf("consumer: offset %d is neither an offset nor OffsetEarliest/OffsetLatest", o.Offset))
	}
	if o.MaxWait < 0 {
		errs = append(errs, fmt.Errorf("consumer: max wait %v is negative", o.MaxWait))
	}
	if o.MaxBytes < 0 || o.MaxRecords < 0 {
		errs = append(errs, errors.New("consumer: max bytes and max records must not be negative"))
	}
	return errors.Join(errs...)
}

// Consumer reads one partition in offset order from a start offset, with
// long polls, following the server's next offset. It keeps no state on the
// server and starts no goroutines. A Consumer is not safe for concurrent
// use; use one per partition.
type Consumer struct {
	c    *Client
	opts ConsumerOptions
	pos  int64 // next offset to fetch; negative until resolved
}

// NewConsumer returns a consumer of one partition. It does not contact the
// server; the first Poll resolves OffsetEarliest or OffsetLatest.
func (c *Client) NewConsumer(opts ConsumerOptions) (*Consumer, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.MaxWait == 0 {
		opts.MaxWait = DefaultConsumerMaxWait
	}
	return &Consumer{c: c, opts: opts, pos: opts.Offset}, nil
}

// Position returns the next offset the consumer will fetch, or
// OffsetEarliest/OffsetLatest before the first Poll resolved it.
func (cs *Consumer) Position() int64 { return cs.pos }

// SetPosition sets the next offset to fetch (or OffsetEarliest/OffsetLatest).
func (cs *Consumer) SetPosition(offset int64) { cs.pos = offset }

// Poll fetches the next records, waiting up to MaxWait when none are
// available; it returns an empty slice, not an error, when the wait ended
// without data. After an error the position is unchanged, so Poll may be
// called again. A position that retention has passed fails with
// *OutOfRangeError; SetPosition to its LogStart to skip ahead.
func (cs *Consumer) Poll(ctx context.Context) ([]FetchedRecord, error) {
	if cs.pos < 0 {
		pos, err := cs.c.resolveOffset(ctx, cs.opts.Topic, cs.opts.Partition, cs.pos)
		if err != nil {
			return nil, err
		}
		cs.pos = pos
	}
	resp, err := cs.c.Fetch(ctx, FetchRequest{
		Topic:      cs.opts.Topic,
		Partition:  cs.opts.Partition,
		Offset:     cs.pos,
		MaxBytes:   cs.opts.MaxBytes,
		MaxRecords: cs.opts.MaxRecords,
		MaxWait:    cs.opts.MaxWait,
	})
	if err != nil {
		return nil, err
	}
	next := resp.Next
	if n := len(resp.Records); n > 0 {
		// Never go back, even if a server answered a stale next offset.
		next = max(next, resp.Records[n-1].Offset+1)
	}
	cs.pos = max(cs.pos, next)
	return resp.Records, nil
}

// Records returns an iterator over the partition's records from the
// consumer's position. It waits for new records forever; it stops after
// yielding an error (ctx's end included) or when the loop body breaks.
func (cs *Consumer) Records(ctx context.Context) iter.Seq2[FetchedRecord, error] {
	return func(yield func(FetchedRecord, error) bool) {
		for {
			recs, err := cs.Poll(ctx)
			if err != nil {
				yield(FetchedRecord{}, err)
				return
			}
			for _, r := range recs {
				if !yield(r, nil) {
					return
				}
			}
		}
	}
}

// resolveOffset turns OffsetEarliest/OffsetLatest into an offset from the
// partition's bounds as the node reports them.
func (c *Client) resolveOffset(ctx context.Context, topic string, partition int32, offset int64) (int64, error) {
	if offset >= 0 {
		return offset, nil
	}
	p, err := c.partitionInfo(ctx, topic, partition)
	if err != nil {
		return 0, err
	}
	if offset == OffsetLatest {
		return p.End, nil
	}
	return p.LogStart, nil
}

// partitionInfo returns the state of one partition.
func (c *Client) partitionInfo(ctx context.Context, topic string, partition int32) (PartitionInfo, error) {
	d, err := c.DescribeTopic(ctx, topic)
	if err != nil {
		return PartitionInfo{}, err
	}
	for _, p := range d.Partitions {
		if p.Partition == partition {
			return p, nil
		}
	}
	return PartitionInfo{}, fmt.Errorf("topic %q has no partition %d: %w", topic, partition, ErrUnknownPartition)
}

// OffsetForTime returns the first offset of a partition whose record
// timestamp is at or after t, or the partition's end offset if there is
// none. The server answers from its time index (a batch is found by its
// largest timestamp, as in Kafka).
func (c *Client) OffsetForTime(ctx context.Context, topic string, partition int32, t time.Time) (int64, error) {
	var out int64
	ts := t.UnixMilli()
	err := c.do(ctx, "ListOffsets", retryAny, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.ListOffsets(ctx, connect.NewRequest(&logdv1.ListOffsetsRequest{Topic: topic, Partition: partition, TimestampMs: &ts}))
		if err != nil {
			return fromRPC(err)
		}
		out = resp.Msg.Offset
		return nil
	})
	return out, err
}
