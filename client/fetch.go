package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/batch"
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
	// Key and Value are nil when null. With the stored batches the
	// client fetches by default (Options.FetchRecords), the Key, Value
	// and header values of the records of one answer share the answer's
	// memory when their batch was not compressed: keeping one record
	// keeps that memory, up to the fetch's MaxBytes; copy what is kept
	// long.
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
// Fetch is retried on every retryable error. It asks for the stored
// record batches and decodes them here, unless Options.FetchRecords asks
// for records (the records are the same).
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
		Batches:    !c.opts.FetchRecords,
	}
	var m *logdv1.FetchResponse
	err := c.do(ctx, "Fetch", retryAny, c.opts.Timeout+fr.MaxWait, func(ctx context.Context) error {
		resp, err := c.rpc.Fetch(ctx, connect.NewRequest(req))
		if err != nil {
			return fromRPC(err)
		}
		m = resp.Msg
		return nil
	})
	if err != nil {
		var oor *OutOfRangeError
		if errors.As(err, &oor) {
			oor.Offset = fr.Offset
		}
		return FetchResponse{}, fmt.Errorf("fetch %s/%d at %d: %w", fr.Topic, fr.Partition, fr.Offset, err)
	}
	out := FetchResponse{LogStart: m.GetLogStartOffset(), End: m.GetEndOffset()}
	out.Records, out.Next, err = fetchedRecords(TopicPartition{Topic: fr.Topic, Partition: fr.Partition}, fr.Offset, fr.MaxRecords, m)
	if err != nil {
		return FetchResponse{}, fmt.Errorf("fetch %s/%d at %d: %w", fr.Topic, fr.Partition, fr.Offset, err)
	}
	return out, nil
}

// fetchedRecords turns a fetch answer of tp into its records at or above
// from, at most maxRecords of them (0: no bound), and the offset to fetch
// next. An answer holds batches (FetchRequest.batches), decoded here, or
// records: a server of an older build answers records whatever was asked,
// and so does any server to a client with Options.FetchRecords.
func fetchedRecords(tp TopicPartition, from int64, maxRecords int32, m *logdv1.FetchResponse) ([]FetchedRecord, int64, error) {
	next := max(from, m.GetNextOffset())
	if b := m.GetBatches(); len(b) > 0 {
		recs, err := batch.Records(b, from, int(maxRecords))
		if err != nil {
			return nil, 0, fmt.Errorf("decode the answer's batches: %w", err)
		}
		out := make([]FetchedRecord, len(recs))
		for i, r := range recs {
			out[i] = FetchedRecord{Topic: tp.Topic, Partition: tp.Partition, Offset: r.Offset, Timestamp: msToTime(r.Timestamp), Key: r.Key, Value: r.Value}
			if len(r.Headers) > 0 {
				hs := make([]Header, len(r.Headers))
				for j, h := range r.Headers {
					hs[j] = Header(h)
				}
				out[i].Headers = hs
			}
		}
		if n := len(recs); n > 0 && n == int(maxRecords) {
			// The last batch may hold more records than were kept: the
			// next fetch starts after the last one kept.
			next = recs[n-1].Offset + 1
		}
		return out, next, nil
	}
	out := make([]FetchedRecord, 0, len(m.GetRecords()))
	for _, r := range m.GetRecords() {
		if r.GetOffset() < from {
			continue
		}
		rec := FetchedRecord{Topic: tp.Topic, Partition: tp.Partition, Offset: r.GetOffset(), Timestamp: msToTime(r.GetTimestampMs()), Key: r.GetKey(), Value: r.GetValue()}
		if hs := r.GetHeaders(); len(hs) > 0 {
			rec.Headers = make([]Header, len(hs))
			for j, h := range hs {
				rec.Headers[j] = Header{Key: h.GetKey(), Value: h.GetValue()}
			}
		}
		out = append(out, rec)
	}
	if n := len(out); n > 0 {
		next = max(next, out[n-1].Offset+1)
	}
	return out, next, nil
}
