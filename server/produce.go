package server

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/partition"
	"github.com/logd-dev/logd/replication"
)

// partitionGroup collects the records of one produce call bound for one
// partition, with their positions in the request.
type partitionGroup struct {
	partition int32
	records   []batch.Record
	positions []int
}

// Produce validates every record, routes each to a partition (explicit,
// else murmur2 of the key, else round-robin), builds one record batch per
// partition and appends them all in one Raft entry. It answers only after
// that entry is committed and applied; an invalid record refuses the whole
// call and nothing is written.
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
	t, err := s.node.FSM().Topic(m.Topic)
	if err != nil {
		return nil, toConnectError(err)
	}
	groups, err := s.route(t, m.Records)
	if err != nil {
		return nil, err
	}
	app := replication.Append{Topic: m.Topic, Batches: make([]replication.PartitionBatch, len(groups))}
	var bytes int
	for i, g := range groups {
		b, err := batch.Build(g.records)
		if err != nil {
			return nil, errInvalid("build batch for %s-%d: %v", m.Topic, g.partition, err)
		}
		bytes += len(b)
		app.Batches[i] = replication.PartitionBatch{Partition: g.partition, Batch: b}
	}
	start := time.Now()
	bases, err := s.node.Append(ctx, app)
	if err != nil {
		return nil, toConnectError(err)
	}
	s.metrics.commitTime.Observe(time.Since(start).Seconds())
	s.metrics.records.WithLabelValues("produce").Add(float64(len(m.Records)))
	s.metrics.bytes.WithLabelValues("produce").Add(float64(bytes))

	resp := &logdv1.ProduceResponse{Results: make([]*logdv1.RecordResult, len(m.Records))}
	for i, g := range groups {
		for j, pos := range g.positions {
			resp.Results[pos] = &logdv1.RecordResult{Partition: g.partition, Offset: bases[i] + int64(j)}
		}
	}
	return connect.NewResponse(resp), nil
}

// route validates records and groups them by partition, in order of first
// appearance.
func (s *Server) route(t *replication.Topic, recs []*logdv1.Record) ([]*partitionGroup, error) {
	n := int32(len(t.Partitions))
	maxBytes := t.MaxBatchBytes()
	now := time.Now().UnixMilli()
	byPart := make(map[int32]*partitionGroup)
	var groups []*partitionGroup
	for i, r := range recs {
		if r == nil {
			return nil, errInvalid("record %d is empty", i)
		}
		var p int32
		switch {
		case r.Partition != nil:
			p = *r.Partition
			if p < 0 || p >= n {
				return nil, toConnectError(unknownPartition(t, p))
			}
		case r.Key != nil:
			p = partition.ForKey(r.Key, n)
		default:
			p = int32(s.nextRoundRobin(t.Name) % uint32(n))
		}
		ts := r.TimestampMs
		if ts < 0 {
			return nil, errInvalid("record %d: negative timestamp %d", i, ts)
		}
		if ts == 0 {
			ts = now
		}
		br := batch.Record{Timestamp: ts, Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			if h == nil {
				return nil, errInvalid("record %d: empty header", i)
			}
			br.Headers = append(br.Headers, batch.Header{Key: h.Key, Value: h.Value})
		}
		if size := batch.RecordSize(br); int64(size) > maxBytes {
			return nil, toConnectError(recordTooLarge(t, i, size, maxBytes))
		}
		g, ok := byPart[p]
		if !ok {
			g = &partitionGroup{partition: p}
			byPart[p] = g
			groups = append(groups, g)
		}
		g.records = append(g.records, br)
		g.positions = append(g.positions, i)
	}
	return groups, nil
}
