package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
)

// Fetch reads whole batches from the partition's log at the requested
// offset and returns their records at or above it, or with batches the
// batches themselves. With max_wait_ms it waits for the next append when
// the offset is the end of the log.
func (s *Server) Fetch(ctx context.Context, req *connect.Request[logdv1.FetchRequest]) (*connect.Response[logdv1.FetchResponse], error) {
	m := req.Msg
	switch {
	case m.Offset < 0:
		return nil, errInvalid("negative offset %d", m.Offset)
	case m.MaxBytes < 0, m.MaxRecords < 0, m.MaxWaitMs < 0:
		return nil, errInvalid("max_bytes, max_records and max_wait_ms must not be negative")
	}
	maxBytes := int(m.MaxBytes)
	if maxBytes == 0 {
		maxBytes = DefaultFetchBytes
	}
	maxBytes = min(maxBytes, MaxFetchBytes)
	if mb := s.answers.maxAnswerBytes(); mb > 0 {
		maxBytes = int(min(int64(maxBytes), mb))
	}
	wait := time.Duration(min(m.MaxWaitMs, MaxFetchWaitMs)) * time.Millisecond
	consistent := req.Header().Get(ConsistentReadHeader) == "true"
	var timer <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	for {
		// Charged before the read, for the most it may build; trimmed to
		// what it built; released once written (answer_budget.go). A long
		// poll holds nothing while it waits.
		charge, err := s.chargeAnswer(ctx, answerCost(int64(maxBytes)))
		if err != nil {
			return nil, err
		}
		// A consistent read of a partition of a data group is answered
		// by the group's leader (the read index orders only the meta
		// group's).
		var r backend.ReadResult
		if consistent {
			r, err = s.b.ReadLeader(ctx, m.Topic, m.Partition, m.Offset, maxBytes)
		} else {
			// Bounded by max_records too: the log reads no further than
			// the batches holding them.
			r, err = s.b.ReadRecords(m.Topic, m.Partition, m.Offset, maxBytes, int(m.MaxRecords))
		}
		if err != nil {
			charge.Release()
			return nil, toConnectError(err)
		}
		if len(r.Batches) > 0 || timer == nil {
			built := answerCost(int64(len(r.Batches)))
			if over := built - charge.Bytes(); over > 0 {
				// One batch larger than max_bytes is served whole: charge
				// the rest, or refuse and drop it.
				if _, err := s.chargeAnswer(ctx, over); err != nil {
					charge.Release()
					return nil, err
				}
			}
			charge.Trim(built)
			return s.fetchResponse(m, r)
		}
		charge.Release()
		select {
		case <-r.Changed:
		case <-timer:
			timer = nil
		case <-ctx.Done():
			return nil, toConnectError(ctx.Err())
		}
	}
}

// fetchResponse answers a read: the records at or above the requested
// offset, decoded, or with batches the stored batches themselves.
func (s *Server) fetchResponse(m *logdv1.FetchRequest, r backend.ReadResult) (*connect.Response[logdv1.FetchResponse], error) {
	data := r.Batches
	resp := &logdv1.FetchResponse{LogStartOffset: r.LogStartOffset, EndOffset: r.EndOffset, NextOffset: m.Offset}
	if len(data) == 0 {
		return connect.NewResponse(resp), nil
	}
	if m.Batches {
		return s.fetchBatches(m, resp, data)
	}
	recs, err := batch.Records(data, m.Offset, int(m.MaxRecords))
	if err != nil {
		return nil, corruptRead(m, err)
	}
	resp.Records = make([]*logdv1.FetchedRecord, len(recs))
	var bytes int
	for i, r := range recs {
		fr := &logdv1.FetchedRecord{Offset: r.Offset, TimestampMs: r.Timestamp, Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			fr.Headers = append(fr.Headers, &logdv1.Header{Key: h.Key, Value: h.Value})
		}
		bytes += len(r.Key) + len(r.Value)
		resp.Records[i] = fr
	}
	if len(recs) > 0 {
		resp.NextOffset = recs[len(recs)-1].Offset + 1
	}
	if m.MaxRecords == 0 || len(recs) < int(m.MaxRecords) {
		// Every returned batch was read whole: continue after the last one.
		// Offsets past the last record may be a compaction gap (records
		// removed at the end of a batch, or whole batches merged into it) or
		// a control batch; stopping inside them would cost the consumer a
		// round trip that returns nothing.
		resp.NextOffset = max(resp.NextOffset, batch.SpanFrom(data, m.Offset, 0).Next)
	}
	s.countFetch(m.Topic, len(recs), bytes)
	return connect.NewResponse(resp), nil
}

// fetchBatches answers the stored batches of a read, without decoding
// them: whole batches up to the one that brings the records at or above
// the offset to max_records (batch.SpanFrom), each with the leader epoch
// a reader is served (batch.ServeLeaderEpochs). data is the read's own
// copy, so it is changed in place.
func (s *Server) fetchBatches(m *logdv1.FetchRequest, resp *logdv1.FetchResponse, data []byte) (*connect.Response[logdv1.FetchResponse], error) {
	span := batch.SpanFrom(data, m.Offset, int(m.MaxRecords))
	if span.Len == 0 || (span.Len < len(data) && (m.MaxRecords == 0 || span.Records < int(m.MaxRecords))) {
		// The read holds only whole verified batches: bytes that are not
		// one are damage, never something to skip.
		_, err := batch.Peek(data[span.Len:])
		if err == nil {
			err = batch.ErrTruncated
		}
		return nil, corruptRead(m, fmt.Errorf("batch at byte %d: %w", span.Len, err))
	}
	data = data[:span.Len]
	batch.ServeLeaderEpochs(data)
	resp.Batches = data
	resp.NextOffset = span.Next
	s.countFetch(m.Topic, span.Records, len(data))
	return connect.NewResponse(resp), nil
}

// countFetch counts what a fetch answers: its records at or above the
// offset, and their key and value bytes (records) or their batch bytes as
// stored (batches).
func (s *Server) countFetch(topic string, records, bytes int) {
	s.metrics.records.WithLabelValues("fetch").Add(float64(records))
	s.metrics.bytes.WithLabelValues("fetch").Add(float64(bytes))
	s.traffic.Add(topic, false, records, int64(bytes))
}

// corruptRead is the error of a read the codec could not walk or decode.
func corruptRead(m *logdv1.FetchRequest, err error) error {
	return toConnectError(fmt.Errorf("%s-%d at %d: %w", m.Topic, m.Partition, m.Offset, errors.Join(errCorruptRead, err)))
}

// errCorruptRead marks a batch that the log served but the codec could not
// decode: stored data is damaged.
var errCorruptRead = errors.New("stored batch failed to decode")
