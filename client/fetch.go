package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// FetchRequest asks for records of one partition from an offset.
type FetchRequest struct {
	Topic     string
	Partition int32
	// Offset is the first offset wanted; it must be within
	// [log start, end offset], else the call fails with *OutOfRangeError.
	Offset int64
	// MaxBytes bounds the record bytes returned, though at least one batch
	// is returned. 0 means the server's default (1 MiB).
	MaxBytes int32
	// MaxRecords bounds the records returned; 0 means no bound beyond
	// MaxBytes.
	MaxRecords int32
	// MaxWait is how long the server waits for data when none is available
	// at Offset (a long poll); 0 returns at once. Millisecond precision.
	MaxWait time.Duration
}

// FetchedRecord is one record read from a partition.
type FetchedRecord struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	// Key and Value are nil when null.
	Key     []byte
	Value   []byte
	Headers []Header
}

// FetchResponse is one batch of records of a partition.
type FetchResponse struct {
	// Records are in offset order. Offsets may have gaps (compaction).
	Records []FetchedRecord
	// LogStart and End are the partition's bounds when it answered.
	LogStart int64
	End      int64
	// Next is the offset to fetch next.
	Next int64
}

// Fetch reads records of one partition. With MaxWait > 0 and no data at
// Offset it waits up to MaxWait and may return no records; Next then equals
// Offset. The per-attempt timeout is the client's Timeout plus MaxWait.
// Fetch is retried on every retryable error.
func (c *Client) Fetch(ctx context.Context, fr FetchRequest) (FetchResponse, error) {
	if fr.MaxWait < 0 {
		return FetchResponse{}, fmt.Errorf("fetch %s/%d: negative max wait %v: %w", fr.Topic, fr.Partition, fr.MaxWait, ErrInvalidArgument)
	}
	req := &logdv1.FetchRequest{
		Topic:      fr.Topic,
		Partition:  fr.Partition,
		Offset:     fr.Offset,
		MaxBytes:   fr.MaxBytes,
		MaxRecords: fr.MaxRecords,
		MaxWaitMs:  int32(min(fr.MaxWait.Milliseconds(), 1<<31-1)),
	}
	var out FetchResponse
	err := c.do(ctx, "Fetch", retryAny, c.opts.Timeout+fr.MaxWait, func(ctx context.Context) error {
		resp, err := c.rpc.Fetch(ctx, connect.NewRequest(req))
		if err != nil {
			return fromRPC(err)
		}
		m := resp.Msg
		out = FetchResponse{LogStart: m.GetLogStartOffset(), End: m.GetEndOffset(), Next: m.GetNextOffset()}
		out.Records = make([]FetchedRecord, len(m.GetRecords()))
		for i, r := range m.GetRecords() {
			rec := FetchedRecord{
				Topic:     req.Topic,
				Partition: req.Partition,
				Offset:    r.GetOffset(),
				Timestamp: msToTime(r.GetTimestampMs()),
				Key:       r.GetKey(),
				Value:     r.GetValue(),
			}
			if hs := r.GetHeaders(); len(hs) > 0 {
				rec.Headers = make([]Header, len(hs))
				for j, h := range hs {
					rec.Headers[j] = Header{Key: h.GetKey(), Value: h.GetValue()}
				}
			}
			out.Records[i] = rec
		}
		return nil
	})
	if err != nil {
		var oor *OutOfRangeError
		if errors.As(err, &oor) {
			oor.Offset = fr.Offset
		}
		return FetchResponse{}, fmt.Errorf("fetch %s/%d at %d: %w", fr.Topic, fr.Partition, fr.Offset, err)
	}
	return out, nil
}
