package kafka

import (
	"context"
	"errors"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
)

// Special timestamps of ListOffsets.
const (
	offsetsLatest       = -1
	offsetsEarliest     = -2
	offsetsMaxTimestamp = -3
)

// listOffsets answers ListOffsets on the leader (a topic the principal
// may not describe is TOPIC_AUTHORIZATION_FAILED): -2 is the log start, -1
// the end (the high watermark, and the last stable offset, the same), -3
// the record with the largest timestamp, and a timestamp the first record
// whose timestamp is at or after it (offset -1 when none is). Offsets and
// timestamps come from the log's time index (offsetForTime).
func (s *Server) listOffsets(ctx context.Context, rc *reqCtx, req *kmsg.ListOffsetsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	ready := s.waitReady(ctx)
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		allowed := rc.mayTopic(t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case !allowed:
				rp.ErrorCode = errTopicAuthorizationFailed
			case !ready || !s.b.LeadsPartition(t.Topic, p.Partition):
				rp.ErrorCode = errNotLeaderOrFollower
			default:
				off, ts, err := s.offsetFor(t.Topic, p.Partition, p.Timestamp)
				rp.ErrorCode = codeFor(err, opRecords)
				if err == nil {
					rp.Offset, rp.Timestamp = off, ts
				}
			}
			rc.note(rp.ErrorCode)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// offsetFor returns the offset and timestamp ListOffsets answers for ts;
// -1 for an unknown timestamp or offset, as Kafka.
func (s *Server) offsetFor(topic string, partition int32, ts int64) (int64, int64, error) {
	bounds, err := s.b.Offsets(topic, partition)
	if err != nil {
		return 0, 0, err
	}
	switch {
	case ts == offsetsEarliest:
		return bounds.LogStart, -1, nil
	case ts == offsetsLatest:
		return bounds.End, -1, nil
	case ts == offsetsMaxTimestamp:
		return s.maxTimestamp(topic, partition, bounds)
	case ts < 0:
		return 0, 0, backend.ErrInvalidArgument
	}
	return s.offsetForTime(topic, partition, ts, bounds)
}

// offsetForTime finds the first record at or after ts: the time index names
// the first batch whose max timestamp is at or after it, and the record is
// found inside (records of one batch need not be in time order; for a
// batch logd cannot decompress, its first offset is answered).
func (s *Server) offsetForTime(topic string, partition int32, ts int64, bounds backend.Offsets) (int64, int64, error) {
	base, err := s.b.OffsetForTime(topic, partition, ts)
	if err != nil {
		return 0, 0, err
	}
	if base >= bounds.End {
		return -1, -1, nil
	}
	r, err := s.b.Read(topic, partition, max(base, bounds.LogStart), 1)
	if err != nil {
		if errors.Is(err, backend.ErrOffsetOutOfRange) {
			return -1, -1, nil // trimmed meanwhile
		}
		return 0, 0, err
	}
	b, _, err := batch.Decode(r.Batches)
	if err != nil {
		info, perr := batch.Peek(r.Batches)
		if perr != nil {
			return 0, 0, err
		}
		return max(info.BaseOffset, bounds.LogStart), info.MaxTimestamp, nil
	}
	for _, rec := range b.Records {
		if rec.Timestamp >= ts && rec.Offset >= bounds.LogStart {
			return rec.Offset, rec.Timestamp, nil
		}
	}
	return max(b.BaseOffset, bounds.LogStart), b.MaxTimestamp, nil
}

// maxTimestamp finds the record with the largest timestamp: the largest
// timestamp t for which the time index still names a batch is the log's
// largest (a binary search over OffsetForTime, 64 lookups at most), and the
// first batch whose max timestamp reaches it holds that record.
func (s *Server) maxTimestamp(topic string, partition int32, bounds backend.Offsets) (int64, int64, error) {
	if bounds.End <= bounds.LogStart {
		return -1, -1, nil
	}
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64) // the max is in [lo, hi]
	if off, err := s.b.OffsetForTime(topic, partition, lo); err != nil {
		return 0, 0, err
	} else if off >= bounds.End {
		return -1, -1, nil
	}
	for lo < hi {
		mid := lo + int64((uint64(hi)-uint64(lo))/2) + 1 // in (lo, hi], without overflow
		off, err := s.b.OffsetForTime(topic, partition, mid)
		if err != nil {
			return 0, 0, err
		}
		if off < bounds.End {
			lo = mid // some batch reaches mid
		} else {
			hi = mid - 1
		}
	}
	off, ts, err := s.offsetForTime(topic, partition, lo, bounds)
	if err != nil || off < 0 {
		return off, ts, err
	}
	return off, lo, nil
}
