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
// offset and returns their records at or above it. With max_wait_ms it
// waits for the next append when the offset is the end of the log.
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
			r, err = s.b.Read(m.Topic, m.Partition, m.Offset, maxBytes)
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

// fetchResponse decodes the records of a read at or above the requested
// offset: the Connect API serves records, where a Kafka front end would
// serve r.Batches as they are.
func (s *Server) fetchResponse(m *logdv1.FetchRequest, r backend.ReadResult) (*connect.Response[logdv1.FetchResponse], error) {
	data := r.Batches
	resp := &logdv1.FetchResponse{LogStartOffset: r.LogStartOffset, EndOffset: r.EndOffset, NextOffset: m.Offset}
	if len(data) == 0 {
		return connect.NewResponse(resp), nil
	}
	recs, err := batch.Records(data, m.Offset, int(m.MaxRecords))
	if err != nil {
		return nil, toConnectError(fmt.Errorf("%s-%d at %d: %w", m.Topic, m.Partition, m.Offset, errors.Join(errCorruptRead, err)))
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
		for rest := data; len(rest) > 0; {
			info, err := batch.Peek(rest)
			if err != nil || info.Length > len(rest) {
				break
			}
			resp.NextOffset = max(resp.NextOffset, info.NextOffset())
			rest = rest[info.Length:]
		}
	}
	s.metrics.records.WithLabelValues("fetch").Add(float64(len(recs)))
	s.metrics.bytes.WithLabelValues("fetch").Add(float64(bytes))
	s.traffic.Add(m.Topic, false, len(recs), int64(bytes))
	return connect.NewResponse(resp), nil
}

// errCorruptRead marks a batch that the log served but the codec could not
// decode: stored data is damaged.
var errCorruptRead = errors.New("stored batch failed to decode")
