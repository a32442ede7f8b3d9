package server

import (
	"context"
	"errors"
	"math"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/dedup"
	"github.com/logd-dev/logd/partition"
)

// Produce appends a call's records whole or not at all, after checking
// the request's shape: the backend routes them (explicit partition, else
// murmur2 of the key, else round-robin), answers repeated idempotency keys
// and builds the batches (replication/produce.go). It answers only after
// the records are committed and applied; an invalid record refuses the
// whole call and nothing is written.
func (s *Server) Produce(ctx context.Context, req *connect.Request[logdv1.ProduceRequest]) (*connect.Response[logdv1.ProduceResponse], error) {
	m := req.Msg
	if err := partition.ValidateTopicName(m.Topic); err != nil {
		return nil, errInvalid("%v", err)
	}
	switch {
	case len(m.Records) == 0:
		return nil, errInvalid("produce to %q without records", m.Topic)
	case len(m.Records) > MaxRecordsPerProduce:
		return nil, errInvalid("%d records in one produce call; at most %d", len(m.Records), MaxRecordsPerProduce)
	}
	recs, err := produceRecords(m.Records)
	if err != nil {
		return nil, err
	}
	pr, err := producerSequence(m.Producer)
	if err != nil {
		return nil, err
	}
	res, err := s.b.Produce(ctx, backend.ProduceRequest{Topic: m.Topic, Records: recs, Producer: pr})
	if err != nil {
		if errors.Is(err, dedup.ErrIdempotencyConflict) {
			s.metrics.dedupConflicts.Inc()
		}
		s.queueHealth.refusal(err) // admission control: count it, set retry-after
		return nil, toConnectError(err)
	}
	s.metrics.dedupDuplicates.Add(float64(res.Duplicates))
	if res.Appended > 0 {
		s.metrics.commitTime.Observe(res.CommitTime.Seconds())
		s.metrics.records.WithLabelValues("produce").Add(float64(res.Appended))
		s.metrics.bytes.WithLabelValues("produce").Add(float64(res.Bytes))
		s.traffic.Add(m.Topic, true, res.Appended, appendedBytes(m.Records, res.Results))
	}
	// One array holds every result message: a call's results live and die
	// together, and one allocation serves them all.
	all := make([]logdv1.RecordResult, len(res.Results))
	out := make([]*logdv1.RecordResult, len(res.Results))
	for i, r := range res.Results {
		rr := &all[i]
		rr.Partition, rr.Offset, rr.Duplicate = r.Partition, r.Offset, r.Duplicate
		out[i] = rr
	}
	resp := connect.NewResponse(&logdv1.ProduceResponse{Results: out, ProducerChecked: res.ProducerChecked})
	if res.Incarnation != 0 && req.Header().Get(ForwardedHeader) != "" {
		// The forwarding node's reads must see these records
		// (read_your_writes.go).
		resp.Header().Set(WrittenHeader, encodeWritten(m.Topic, res))
	}
	return resp, nil
}

// producerSequence converts a request's producer identity, nil without
// one. The backend checks the rest (replication/produce.go).
func producerSequence(p *logdv1.ProducerSequence) (*backend.ProducerSequence, error) {
	if p == nil {
		return nil, nil
	}
	if p.ProducerEpoch < 0 || p.ProducerEpoch > math.MaxInt16 {
		return nil, errInvalid("producer epoch %d is outside [0, %d]", p.ProducerEpoch, math.MaxInt16)
	}
	return &backend.ProducerSequence{ID: p.ProducerId, Epoch: int16(p.ProducerEpoch), BaseSequences: p.BaseSequences}, nil
}

// MaxTimestampMs is the latest record timestamp a produce may carry: the
// last millisecond of year 9999. Later ones are refused: RFC 3339, which
// the JSON encoding of a time uses (logctl consume -o json), has four-digit
// years.
const MaxTimestampMs = 253402300799999

// produceRecords converts a request's records for the backend, refusing
// empty records and headers. The records keep referring to the request's
// keys, values and header values.
func produceRecords(in []*logdv1.Record) ([]backend.ProduceRecord, error) {
	out := make([]backend.ProduceRecord, len(in))
	for i, r := range in {
		if r == nil {
			return nil, errInvalid("record %d is empty", i)
		}
		if r.TimestampMs < 0 || r.TimestampMs > MaxTimestampMs {
			return nil, errInvalid("record %d: timestamp %d ms is outside [0, %d] (1970 to the end of year 9999)", i, r.TimestampMs, int64(MaxTimestampMs))
		}
		pr := &out[i]
		pr.TimestampMs, pr.Key, pr.Value, pr.IdempotencyKey = r.TimestampMs, r.Key, r.Value, r.IdempotencyKey
		if r.Partition != nil {
			pr.Partition, pr.HasPartition = *r.Partition, true
		}
		if len(r.Headers) > 0 {
			pr.Headers = make([]batch.Header, len(r.Headers))
			for j, h := range r.Headers {
				if h == nil {
					return nil, errInvalid("record %d: empty header", i)
				}
				pr.Headers[j] = batch.Header{Key: h.Key, Value: h.Value}
			}
		}
	}
	return out, nil
}

// appendedBytes sums the key and value bytes of the records a produce
// appended (not those answered as duplicates), as a fetch of records
// counts them, so a topic's bytes in and out compare for such fetches
// (topic_metrics.go).
func appendedBytes(recs []*logdv1.Record, results []backend.RecordResult) int64 {
	var n int64
	for i, r := range recs {
		if i < len(results) && results[i].Duplicate {
			continue
		}
		n += int64(len(r.Key) + len(r.Value))
	}
	return n
}
