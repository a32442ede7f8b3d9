package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
)

// defaultProduceTimeout is a produce's commit deadline when the request
// gives none.
const defaultProduceTimeout = 30 * time.Second

// partResult is one partition's outcome in a produce.
type partResult struct {
	code    int16
	msg     string
	base    int64
	records int
	bytes   int
}

// topicAppend is the valid batches of one topic in a produce, appended in
// one Raft entry.
type topicAppend struct {
	topic   string
	batches []backend.PartitionBatch
	// results[i] is where batches[i]'s outcome goes.
	results []*partResult
}

// produce answers Produce: a topic the principal may not write is
// TOPIC_AUTHORIZATION_FAILED (auth.go), and nothing is appended to it;
// each other partition's batch is checked (checkBatch), and a topic's
// valid batches are appended as they are in one Raft entry, the topics of
// the request at once, once the produce quota admits their bytes (a
// principal in debt is refused with NOT_ENOUGH_REPLICAS, nothing
// written, and throttle_time_ms). The response comes once every append
// is committed and applied, for acks -1 and 1 alike (logd has no
// leader-only write); with acks 0 there is none (errNoResponse), and a
// failure is only logged and counted.
func (s *Server) produce(ctx context.Context, rc *reqCtx, req *kmsg.ProduceRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	results := make([][]partResult, len(req.Topics))
	for i, t := range req.Topics {
		results[i] = make([]partResult, len(t.Partitions))
	}
	denied := make([]bool, len(req.Topics))
	for i, t := range req.Topics {
		denied[i] = !rc.mayTopic(t.Topic)
	}
	fail := func(code int16, msg string) {
		for i := range results {
			for j := range results[i] {
				results[i][j] = partResult{code: code, msg: msg}
			}
		}
	}
	deny := func() {
		for i := range results {
			if denied[i] {
				for j := range results[i] {
					results[i][j] = partResult{code: errTopicAuthorizationFailed}
				}
			}
		}
	}
	switch {
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		fail(errInvalidRequiredAcks, fmt.Sprintf("acks %d: want -1, 0 or 1", req.Acks))
	case req.TransactionID != nil:
		fail(errInvalidTxnState, "transactions are not supported")
	case !s.waitReady(ctx) || !s.b.IsLeader() && !s.allPlaced(req):
		fail(errNotLeaderOrFollower, "")
		deny()
	default:
		deny()
		var appends []*topicAppend
		var size int64
		for i, t := range req.Topics {
			if denied[i] {
				continue
			}
			if a := s.checkTopic(t, results[i]); a != nil {
				appends = append(appends, a)
				for _, b := range a.batches {
					size += int64(len(b.Batch))
				}
			}
		}
		throttle, over := rc.admitProduce(size)
		resp.ThrottleMillis = throttle
		if over != "" {
			for _, a := range appends {
				for _, r := range a.results {
					*r = partResult{code: errNotEnoughReplicas, msg: over}
				}
			}
			appends = nil
		}
		timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
		if timeout <= 0 {
			timeout = defaultProduceTimeout
		}
		actx, cancel := context.WithTimeout(ctx, timeout)
		throttles := make([]int32, len(appends))
		var wg sync.WaitGroup
		for i, a := range appends {
			wg.Add(1)
			go func() {
				defer wg.Done()
				throttles[i] = s.appendTopic(actx, a)
			}()
		}
		wg.Wait()
		cancel()
		resp.ThrottleMillis = slices.Max(append(throttles, resp.ThrottleMillis))
	}

	for i, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		var records, bytes int
		for j, p := range t.Partitions {
			r := results[i][j]
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = r.code
			rp.BaseOffset = -1
			if r.code == errNone {
				rp.BaseOffset = r.base
				if off, err := s.b.Offsets(t.Topic, p.Partition); err == nil {
					rp.LogStartOffset = off.LogStart
				}
				records += r.records
				bytes += r.bytes
			} else if r.msg != "" {
				msg := r.msg
				rp.ErrorMessage = &msg
			}
			rc.note(r.code)
			rt.Partitions = append(rt.Partitions, rp)
		}
		if records > 0 {
			s.metrics.records.WithLabelValues("produce").Add(float64(records))
			s.metrics.bytes.WithLabelValues("produce").Add(float64(bytes))
			s.traffic.Add(t.Topic, true, records, int64(bytes))
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.Acks == 0 {
		for code := range rc.codes {
			s.logger.Debug("kafka: produce with acks=0 failed", "error", errorName(code))
		}
		return nil, errNoResponse
	}
	return resp, nil
}

// checkTopic checks the batches of one topic of a produce, filling results
// for the partitions refused, and returns the batches to append (nil if
// none).
func (s *Server) checkTopic(t kmsg.ProduceRequestTopic, results []partResult) *topicAppend {
	info, err := s.b.Topic(t.Topic)
	if err != nil {
		for j := range results {
			results[j] = partResult{code: codeFor(err, opRecords)}
		}
		return nil
	}
	maxBytes, _ := strconv.ParseInt(info.Config["max.message.bytes"], 10, 64)
	compacted := slices.Contains(strings.Split(info.Config[cleanupPolicy], ","), "compact")
	a := &topicAppend{topic: t.Topic}
	seen := map[int32]bool{}
	for j, p := range t.Partitions {
		r := &results[j]
		switch {
		case p.Partition < 0 || p.Partition >= info.Partitions:
			*r = partResult{code: errUnknownTopicOrPartition}
			continue
		case seen[p.Partition]:
			*r = partResult{code: errInvalidRequest, msg: "partition named twice in one request"}
			continue
		case maxBytes > 0 && int64(len(p.Records)) > maxBytes:
			*r = partResult{code: errMessageTooLarge, msg: fmt.Sprintf("batch of %d bytes; the topic's max.message.bytes is %d", len(p.Records), maxBytes)}
			continue
		}
		seen[p.Partition] = true
		n, code, msg := checkBatch(p.Records, s.b, compacted)
		if code != errNone {
			*r = partResult{code: code, msg: msg}
			continue
		}
		*r = partResult{records: n, bytes: len(p.Records)}
		a.batches = append(a.batches, backend.PartitionBatch{Partition: p.Partition, Batch: p.Records})
		a.results = append(a.results, r)
	}
	if len(a.batches) == 0 {
		return nil
	}
	return a
}

// features is what checkBatch asks the backend: which codecs and whether
// producer ids may be appended now.
type features interface {
	CheckCompression(c batch.Compression) error
	CheckIdempotence() error
}

// checkBatch checks a partition's records as a producer must send them:
// exactly one RecordBatch v2 with a valid CRC-32C, dense offsets from 0,
// at least one record, not a control batch, not transactional, a producer
// id only once the cluster serves idempotent producers (allowed's
// CheckIdempotence; then with an epoch and a first sequence of 0 or
// more), and with create-time timestamps. The batch is decoded whole, decompressed
// if it is, so every record's framing is checked. A codec the cluster does
// not read yet (snappy, lz4 and zstd until every member's build reads them
// at apply: allowed, the backend's CheckCompression) is
// UNSUPPORTED_COMPRESSION_TYPE. On a compacted topic every record needs a
// key (a null one is INVALID_RECORD, as in Kafka: compaction keeps the
// last record of each key). It returns the record count, or a Kafka code
// and message.
func checkBatch(b []byte, allowed features, compacted bool) (int, int16, string) {
	if len(b) == 0 {
		return 0, errCorruptMessage, "no records"
	}
	info, err := batch.Verify(b)
	if err != nil {
		if errors.Is(err, batch.ErrBadMagic) {
			return 0, errInvalidRecord, "record batches must be magic 2 (produce v3+)"
		}
		return 0, errCorruptMessage, errorMessage(err)
	}
	switch {
	case info.Length != len(b):
		return 0, errInvalidRecord, "a produce request carries exactly one record batch per partition"
	case info.RecordCount <= 0 || info.LastOffsetDelta != info.RecordCount-1:
		return 0, errInvalidRecord, fmt.Sprintf("batch of %d records with last offset delta %d", info.RecordCount, info.LastOffsetDelta)
	case info.IsControl():
		return 0, errInvalidRecord, "control batches are written by brokers only"
	case info.IsTransactional():
		return 0, errInvalidTxnState, "transactions are not supported"
	case info.ProducerID >= 0 && allowed.CheckIdempotence() != nil:
		return 0, errInvalidRecord, "idempotent producers are served once every node runs a build that serves them; produce without a producer id until then"
	case info.ProducerID >= 0 && (info.ProducerEpoch < 0 || info.BaseSequence < 0):
		return 0, errInvalidRecord, fmt.Sprintf("producer %d with epoch %d and first sequence %d", info.ProducerID, info.ProducerEpoch, info.BaseSequence)
	case info.Attributes&0x08 != 0:
		return 0, errInvalidTimestamp, "LogAppendTime batches are written by brokers only"
	}
	switch c := info.Compression(); c {
	case batch.CompressionNone, batch.CompressionGzip, batch.CompressionSnappy, batch.CompressionLZ4, batch.CompressionZstd:
		if err := allowed.CheckCompression(c); err != nil {
			return 0, errUnsupportedCompression, unsupportedCompression(c, err)
		}
		// Verified above: the records' framing is what is left to check.
		d, _, err := batch.DecodeVerified(b, info)
		if err != nil {
			return 0, errCorruptMessage, errorMessage(err)
		}
		if compacted {
			for _, r := range d.Records {
				if r.Key == nil {
					return 0, errInvalidRecord, "a compacted topic cannot accept a record without a key"
				}
			}
		}
	default:
		return 0, errCorruptMessage, fmt.Sprintf("unknown compression %s", c)
	}
	return int(info.RecordCount), errNone, ""
}

// unsupportedCompression is the message of a codec the cluster does not
// read yet.
func unsupportedCompression(c batch.Compression, err error) string {
	return fmt.Sprintf("%s batches are accepted once every node runs a build that reads them (%v); use gzip or none until then", c, err)
}

// appendTopic appends a topic's valid batches and fills their results; it
// returns the throttle to answer with (throttleFor).
func (s *Server) appendTopic(ctx context.Context, a *topicAppend) int32 {
	// checkBatch verified every batch's CRC: the proposer does not again.
	bases, err := s.b.Append(ctx, backend.Append{Topic: a.topic, Batches: a.batches, Verified: true})
	var partial *backend.PartialAppendError
	if errors.As(err, &partial) {
		// Some batches were refused by their partition's producer state
		// (docs/kafka.md, "Idempotent producers"), the others written.
		for i, r := range a.results {
			if e := partial.Errs[i]; e != nil {
				*r = partResult{code: codeFor(e, opRecords), msg: errorMessage(e)}
			} else {
				r.base = partial.Offsets[i]
			}
		}
		return 0
	}
	if err != nil {
		code := codeFor(err, opRecords)
		switch {
		case code == errInvalidRequest:
			// The state machine's own batch checks: the batch is bad.
			code = errCorruptMessage
		case errors.Is(err, backend.ErrFeatureLevel) && hasProducerID(a.batches) && s.b.CheckIdempotence() != nil:
			// A member with an older build joined since checkBatch, and
			// the batches carry producer ids it would not judge.
			code = errInvalidRecord
		case errors.Is(err, backend.ErrFeatureLevel):
			// A member with an older build joined since checkBatch:
			// the other feature an append needs is a codec.
			code = errUnsupportedCompression
		}
		msg := errorMessage(err)
		for _, r := range a.results {
			*r = partResult{code: code, msg: msg}
		}
		return throttleFor(err)
	}
	for i, r := range a.results {
		r.base = bases[i]
	}
	return 0
}

// hasProducerID reports whether a batch of bs carries a producer id.
func hasProducerID(bs []backend.PartitionBatch) bool {
	for _, b := range bs {
		if info, err := batch.Peek(b.Batch); err == nil && info.ProducerID >= 0 {
			return true
		}
	}
	return false
}

// allPlaced reports whether every topic of req is placed over data
// groups: any node appends those, at each partition's group leader
// (docs/architecture.md, "Data groups"); the rest only the meta leader.
func (s *Server) allPlaced(req *kmsg.ProduceRequest) bool {
	for _, t := range req.Topics {
		info, err := s.b.Topic(t.Topic)
		if err != nil || info.Placement == nil {
			return false
		}
	}
	return len(req.Topics) > 0
}
