package kafka

import (
	"context"
	"errors"
	"math"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/internal/membudget"
)

// fetch answers Fetch: for each partition, the stored batches from the one
// that holds the fetch offset on, as stored (but for their leader epoch, -1), at least one
// whole batch for the first partition with data however small the limits
// (KIP-74), then more while the response's max_bytes and the partition's
// max bytes allow. The high watermark is the partition's end (every
// applied record is committed) and so is the last stable offset (logd has
// no transactions). An offset below the log start or above the end is
// OFFSET_OUT_OF_RANGE, with the bounds, so the client resets.
//
// With less than min_bytes of records the fetch waits, up to max_wait_ms,
// for an append to one of its partitions, and reads again. Only the leader
// serves fetches, as in Kafka: a consumer that fetched from a former
// leader cut off from the others would otherwise wait for records that
// never come, without an error that makes it refresh its metadata.
//
// A topic the principal may not read is TOPIC_AUTHORIZATION_FAILED
// (auth.go). While the principal's fetch quota is in debt the answer is
// empty, with throttle_time_ms, as Kafka throttles a fetch; the batch
// bytes served are taken from the quota after, and the answer carries
// the throttle that leaves.
func (s *Server) fetch(ctx context.Context, rc *reqCtx, req *kmsg.FetchRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if req.Version >= 7 && (req.SessionID != 0 || req.SessionEpoch > 0) {
		// Fetch sessions (KIP-227) are not kept: every response says
		// session 0, so a client only ever sends full fetches; one that
		// names a session anyway is told it does not exist.
		resp.ErrorCode = errFetchSessionIDNotFound
		rc.note(resp.ErrorCode)
		return resp
	}
	if throttle, ok := rc.admitFetch(); !ok {
		resp.ThrottleMillis = throttle
		return resp
	}
	var denied map[string]bool
	for _, t := range req.Topics {
		if !rc.mayTopic(t.Topic) {
			if denied == nil {
				denied = map[string]bool{}
			}
			denied[t.Topic] = true
		}
	}
	ready := s.waitReady(ctx)
	leads := func(topic string, p int32) bool { return ready && s.b.LeadsPartition(topic, p) }
	asked := int32(0)
	if req.Version >= 3 {
		asked = req.MaxBytes
	}
	maxBytes, wait := s.fetchBounds(asked, req.MaxWaitMillis)
	// pass reads every partition once under a charge of the answer budget
	// (Options.Answers), which the connection releases once the answer is
	// written (conn.go); false: the budget stayed full, and the answer is
	// empty and throttled.
	pass := func() (fetchResult, bool) {
		rc.releaseAnswer()
		charge, ok := s.chargeAnswer(ctx, rc, maxBytes)
		if !ok {
			return fetchResult{}, false
		}
		res := s.fetchOnce(req, leads, denied, maxBytes)
		if over := res.bytes - charge.Bytes(); over > 0 {
			// The one batch KIP-74 serves past the limits.
			if _, ok := s.chargeAnswer(ctx, rc, over); !ok {
				rc.releaseAnswer()
				return fetchResult{}, false
			}
		} else {
			charge.Trim(res.bytes)
		}
		return res, true
	}
	throttled := func() kmsg.Response {
		resp.Topics = nil
		resp.ThrottleMillis = int32(backend.DefaultOverloadRetryAfter.Milliseconds())
		return resp
	}
	var timer *time.Timer
	for {
		res, ok := pass()
		if !ok {
			return throttled()
		}
		resp.Topics = res.topics
		if !ready || res.failed || res.bytes >= int64(max(req.MinBytes, 1)) || wait <= 0 {
			s.noteFetch(rc, resp, res)
			return resp
		}
		// A long poll holds nothing of the budget while it waits.
		rc.releaseAnswer()
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		cases := make([]reflect.SelectCase, 0, len(res.changed)+2)
		cases = append(cases,
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
		for _, ch := range res.changed {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
		}
		switch i, _, _ := reflect.Select(cases); i {
		case 0, 1:
			// Deadline or the connection went away: answer what there
			// is now (a record may have come just before).
			res, ok := pass()
			if !ok {
				return throttled()
			}
			resp.Topics = res.topics
			s.noteFetch(rc, resp, res)
			return resp
		}
	}
}

// fetchResult is one pass over a fetch's partitions.
type fetchResult struct {
	topics []kmsg.FetchResponseTopic
	bytes  int64
	// failed: a partition has an error, which is answered at once.
	failed bool
	// changed are the partitions' wake-up channels.
	changed []<-chan struct{}
	codes   []int16
	// served counts, per topic with records in the answer, the records
	// at or above the fetch offsets and the batch bytes.
	served []topicServed
}

// topicServed is what a fetch serves of one topic.
type topicServed struct {
	topic   string
	records int
	bytes   int64
}

// noteFetch counts what a fetch answers, and takes its bytes from the
// fetch quota.
func (s *Server) noteFetch(rc *reqCtx, resp *kmsg.FetchResponse, res fetchResult) {
	for _, c := range res.codes {
		rc.note(c)
	}
	s.metrics.bytes.WithLabelValues("fetch").Add(float64(res.bytes))
	for _, t := range res.served {
		s.traffic.Add(t.topic, false, t.records, t.bytes)
	}
	resp.ThrottleMillis = rc.tookFetch(res.bytes)
}

// fetchOnce reads every partition of a fetch once; the topics in denied
// are refused.
func (s *Server) fetchOnce(req *kmsg.FetchRequest, leads func(topic string, p int32) bool, denied map[string]bool, maxBytes int64) fetchResult {
	var res fetchResult
	full := false // the response's max bytes are spent
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.FetchResponseTopicPartition, 0, len(t.Partitions))
		served := topicServed{topic: t.Topic}
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p.Partition
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			rp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			// No records is an empty record set, never a null one:
			// librdkafka refuses a null set (MessageSetSize -1).
			rp.RecordBatches = []byte{}
			switch {
			case denied[t.Topic]:
				rp.ErrorCode = errTopicAuthorizationFailed
			case !leads(t.Topic, p.Partition):
				rp.ErrorCode = errNotLeaderOrFollower
			default:
				s.fetchPartition(&res, &rp, t.Topic, p, maxBytes, &full)
			}
			if rp.ErrorCode != errNone {
				res.failed = true
				res.codes = append(res.codes, rp.ErrorCode)
			}
			if len(rp.RecordBatches) > 0 {
				served.records += batch.SpanFrom(rp.RecordBatches, p.FetchOffset, 0).Records
				served.bytes += int64(len(rp.RecordBatches))
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		if served.bytes > 0 {
			res.served = append(res.served, served)
		}
		res.topics = append(res.topics, rt)
	}
	return res
}

// fetchPartition reads one partition into rp.
func (s *Server) fetchPartition(res *fetchResult, rp *kmsg.FetchResponseTopicPartition, topic string, p kmsg.FetchRequestTopicPartition, maxBytes int64, full *bool) {
	limit := int64(p.PartitionMaxBytes)
	if left := maxBytes - res.bytes; left < limit {
		limit = left
	}
	if *full || limit <= 0 {
		// Nothing more fits: the bounds only, so the client sees its lag.
		off, err := s.b.Offsets(topic, p.Partition)
		if err != nil {
			rp.ErrorCode = codeFor(err, opRecords)
			return
		}
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = off.End, off.End, off.LogStart
		return
	}
	r, err := s.b.Read(topic, p.Partition, p.FetchOffset, int(min(limit, math.MaxInt32)))
	if err != nil {
		rp.ErrorCode = codeFor(err, opRecords)
		var oor *backend.OutOfRangeError
		if errors.As(err, &oor) {
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = oor.End, oor.End, oor.Start
		}
		if rp.ErrorCode != errOffsetOutOfRange {
			s.logger.Debug("kafka: fetch", "topic", topic, "partition", p.Partition, "offset", p.FetchOffset, "err", err)
		}
		return
	}
	rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = r.EndOffset, r.EndOffset, r.LogStartOffset
	res.changed = append(res.changed, r.Changed)
	n := int64(len(r.Batches))
	if n == 0 {
		return
	}
	if res.bytes > 0 && n > limit {
		// Only the first partition with data may pass the limits (the
		// one batch KIP-74 guarantees); this one waits for the next fetch.
		*full = true
		return
	}
	// The log keeps its own bookkeeping (the Raft index of the append)
	// in each batch's partition leader epoch, which a client reads as the
	// leader epoch: it becomes -1 (unknown), as the leader epoch Metadata
	// gives.
	batch.ServeLeaderEpochs(r.Batches)
	rp.RecordBatches = r.Batches
	res.bytes += n
	if res.bytes >= maxBytes {
		*full = true
	}
}

// fetchBounds is the most a fetch answer may hold (what the request asks,
// 0 or less for no bound, within the listener's bound and the answer
// budget's largest charge) and how long it may wait.
func (s *Server) fetchBounds(maxBytes, maxWaitMillis int32) (int64, time.Duration) {
	bytes := int64(math.MaxInt32)
	if maxBytes > 0 {
		bytes = int64(maxBytes)
	}
	bytes = min(bytes, int64(s.limits.MaxFetchBytes))
	if s.answers != nil && s.answers.MaxCharge() > 0 {
		bytes = min(bytes, s.answers.MaxCharge())
	}
	wait := time.Duration(max(maxWaitMillis, 0)) * time.Millisecond
	if s.limits.MaxFetchWait > 0 {
		wait = min(wait, s.limits.MaxFetchWait)
	}
	return bytes, wait
}

// chargeAnswer charges n bytes of a Fetch answer to the answer budget for
// rc's client, waiting at most Options.AnswerWait; the connection releases
// it once the answer is written. False: the budget stayed full (or the
// connection ended), and nothing was charged. Without a budget it charges
// nothing and returns true.
func (s *Server) chargeAnswer(ctx context.Context, rc *reqCtx, n int64) (*membudget.Charge, bool) {
	if s.answers == nil {
		return nil, true
	}
	key := membudget.AddressKey(rc.c.nc.RemoteAddr().String())
	if rc.c.method != methodNone {
		key = membudget.PrincipalKey(rc.c.principal.String())
	}
	c, err := s.answers.Acquire(ctx, key, n, s.answerWait)
	if err != nil {
		return nil, false
	}
	rc.answers = append(rc.answers, c)
	return c, true
}
