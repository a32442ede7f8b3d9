package client

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// Header is a record header. Keys may repeat.
type Header struct {
	Key   string
	Value []byte
}

// Record is a record to produce.
type Record struct {
	// Key is the record key; nil is a null key, an empty non-nil slice is
	// an empty key. Records with a key and no Partition go to the partition
	// murmur2(key) picks, as Kafka clients do.
	Key []byte
	// Value is the payload; nil is a null value (a compaction tombstone).
	Value []byte
	// Headers are carried as given.
	Headers []Header
	// Timestamp is the record's time; the zero Time lets the server stamp
	// it. Precision is milliseconds.
	Timestamp time.Time
	// Partition, if set, chooses the partition explicitly.
	Partition *int32
	// IdempotencyKey, if set, makes the append idempotent within the
	// topic's idempotency.window.ms: sending the same key with the same
	// key, value and headers again returns the original partition and
	// offset (Result.Duplicate) and appends nothing; the same key with a
	// different payload fails with ErrIdempotencyConflict. Use a business
	// identifier (an order id, a payment id), not a random value per try.
	IdempotencyKey string
}

// Result is where one produced record was written.
type Result struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
	// Duplicate is true when the record's idempotency key was already in
	// the window: nothing was appended and Partition and Offset are the
	// original record's.
	Duplicate bool `json:"duplicate,omitempty"`
}

// Produce appends records to a topic in one call and returns, in record
// order, where each was written. The server answers once the records are
// committed by a quorum and applied; a call is all or nothing.
//
// Retries: Produce is repeated only after failures where the server
// guarantees nothing was written: ErrNotLeader (the node found no leader to
// forward to), ErrOverloaded (admission control), or a request that never
// completely reached the server (a connection that could not be made, or
// that broke while the request was written). After ErrUnavailable, a
// timeout or a connection broken while waiting for the answer the records
// may or may not have been written: if every record carries an
// IdempotencyKey, Produce retries those too (the retry returns the original
// offsets of whatever was written, marked Duplicate); otherwise it returns
// at once. Either way, once an attempt may have written, the error (if no
// retry succeeded) is ErrOutcomeUnknown, even when later attempts failed
// with errors that say they wrote nothing.
func (c *Client) Produce(ctx context.Context, topic string, records []Record) ([]Result, error) {
	out, _, err := c.produce(ctx, topic, records, nil)
	return out, err
}

// produce is Produce, with seq as the call's producer identity when it is
// not nil (the Producer's, ProducerOptions.MaxInFlight): the server then
// recognises a repeat of the call as a duplicate, so every retryable
// failure is retried, and checked reports whether it judged the identity
// (a server of an earlier build ignores it).
func (c *Client) produce(ctx context.Context, topic string, records []Record, seq *logdv1.ProducerSequence) (out []Result, checked bool, err error) {
	rc := retryUnwritten
	if seq != nil || allKeyed(records) {
		rc = retryRepeatable
	}
	req := &logdv1.ProduceRequest{Topic: topic, Records: make([]*logdv1.Record, len(records)), Producer: seq}
	for i, r := range records {
		pr := &logdv1.Record{
			Key:            r.Key,
			Value:          r.Value,
			TimestampMs:    timeToMs(r.Timestamp),
			Partition:      r.Partition,
			IdempotencyKey: r.IdempotencyKey,
		}
		if len(r.Headers) > 0 {
			pr.Headers = make([]*logdv1.Header, len(r.Headers))
			for j, h := range r.Headers {
				pr.Headers[j] = &logdv1.Header{Key: h.Key, Value: h.Value}
			}
		}
		req.Records[i] = pr
	}
	err = c.do(ctx, "Produce", rc, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.Produce(ctx, connect.NewRequest(req))
		if err != nil {
			return fromRPC(err)
		}
		rs := resp.Msg.GetResults()
		if len(rs) != len(records) {
			return fmt.Errorf("server answered %d results for %d records", len(rs), len(records))
		}
		out = make([]Result, len(rs))
		for i, r := range rs {
			out[i] = Result{Partition: r.GetPartition(), Offset: r.GetOffset(), Duplicate: r.GetDuplicate()}
		}
		checked = resp.Msg.GetProducerChecked()
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("produce to %q: %w", topic, err)
	}
	return out, checked, nil
}

// initProducerID asks for a producer id for writing topic
// (InitProducerId). Repeating the call after a lost answer only wastes
// an id.
func (c *Client) initProducerID(ctx context.Context, topic string) (id int64, epoch int16, err error) {
	err = c.do(ctx, "InitProducerId", retryAny, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.InitProducerId(ctx, connect.NewRequest(&logdv1.InitProducerIdRequest{Topic: topic}))
		if err != nil {
			return fromRPC(err)
		}
		id, epoch = resp.Msg.GetProducerId(), int16(resp.Msg.GetProducerEpoch())
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("producer id for %q: %w", topic, err)
	}
	return id, epoch, nil
}

// allKeyed reports whether every record carries an idempotency key, which
// makes retrying an ambiguous failure safe.
func allKeyed(records []Record) bool {
	for _, r := range records {
		if r.IdempotencyKey == "" {
			return false
		}
	}
	return len(records) > 0
}
