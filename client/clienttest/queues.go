package clienttest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// The fake's work queues follow the server's rules where a client can see
// them: one live delivery per record with its own token; only the current
// token of a live lease is accepted (an older or expired one is refused
// with REASON_STALE_TOKEN and changes nothing; a call whose every token is
// stale fails as a whole); a second ack of a delivery is a duplicate;
// expired leases come back lazily by the fake's clock; a transient nack
// waits for its delay or backoff; a permanent nack, the last allowed
// delivery failing or expiring, a passed deadline header or the age limit
// move the record to the dead-letter topic (created with the group) with
// the logd-dlq-* headers. Simplifications: the backoff is its upper bound
// min(max, base·2^(n-1)) (the server draws a full-jitter delay below it),
// health rates are zero, and there is no admission control.

// Queue group defaults, as the server's.
const (
	fakeQueueLease         = 30 * time.Second
	fakeQueueMaxDeliveries = 5
	fakeQueueBackoffBase   = time.Second
	fakeQueueBackoffMax    = 5 * time.Minute
	fakeQueueMaxInFlight   = 1000
	fakeQueueDeadline      = "deadline"
)

// queueGroup is one queue group of the fake; guarded by Fake.mu.
type queueGroup struct {
	topic, name string
	cfg         *logdv1.QueueGroupConfig // effective: every field set
	created     time.Time
	paused      bool
	parts       []*queuePart
}

type queuePart struct {
	next  int64                 // offsets at or above it were never delivered
	start int64                 // offsets below it are finished
	recs  map[int64]*queueEntry // delivered, not finished
	done  map[int64]bool        // finished at or above start
	// Finished deliveries by token: acks answer duplicates with these.
	acked                       map[string]bool
	nAcked, nDead, nNack, nExpd int64
}

// queueEntry is a delivered record that is not finished.
type queueEntry struct {
	deliveries  int
	leaseUntil  time.Time // zero: not in flight
	availableAt time.Time // when not in flight: offered again then
	first, last time.Time
	lastErr     string
	expiredAt   time.Time // the last lease expired (not nacked)
}

func (e *queueEntry) inFlight(now time.Time) bool {
	return !e.leaseUntil.IsZero() && now.Before(e.leaseUntil)
}

func queueKey(topic, group string) string { return topic + "\x00" + group }

func unknownQueueGroup(topic, group string) error {
	return reasonError(connect.CodeNotFound, logdv1.Reason_REASON_UNKNOWN_QUEUE_GROUP, "queue group %q on topic %q does not exist", group, topic)
}

func invalid(format string, args ...any) error {
	return reasonError(connect.CodeInvalidArgument, logdv1.Reason_REASON_INVALID_ARGUMENT, format, args...)
}

// notifyLocked wakes long polls (fetches and claims); f.mu is held.
func (f *Fake) notifyLocked() {
	if !f.closed {
		close(f.changed)
		f.changed = make(chan struct{})
	}
}

// queueGroupLocked returns a group; f.mu is held.
func (f *Fake) queueGroupLocked(topic, group string) (*queueGroup, error) {
	if _, ok := f.topics[topic]; !ok {
		return nil, unknownTopic(topic)
	}
	q, ok := f.queues[queueKey(topic, group)]
	if !ok {
		return nil, unknownQueueGroup(topic, group)
	}
	return q, nil
}

// mergeQueueConfig sets the fields of change on cfg, checking them.
func mergeQueueConfig(cfg, change *logdv1.QueueGroupConfig) error {
	if change == nil {
		return nil
	}
	if change.LeaseMs != nil && change.GetLeaseMs() <= 0 ||
		change.MaxDeliveries != nil && change.GetMaxDeliveries() <= 0 ||
		change.BackoffBaseMs != nil && change.GetBackoffBaseMs() < 0 ||
		change.BackoffMaxMs != nil && change.GetBackoffMaxMs() < 0 ||
		change.MaxInFlight != nil && change.GetMaxInFlight() <= 0 {
		return invalid("queue group settings must be positive")
	}
	n := proto.Clone(cfg).(*logdv1.QueueGroupConfig)
	proto.Merge(n, change)
	if n.GetAgeLimitMs() < 0 {
		n.AgeLimitMs = proto.Int64(0)
	}
	if n.GetBackoffMaxMs() < n.GetBackoffBaseMs() {
		return invalid("backoff max %d ms is below backoff base %d ms", n.GetBackoffMaxMs(), n.GetBackoffBaseMs())
	}
	proto.Reset(cfg)
	proto.Merge(cfg, n)
	return nil
}

// CreateQueueGroup implements logdv1connect.LogServiceHandler; it creates
// the dead-letter topic when missing.
func (f *Fake) CreateQueueGroup(ctx context.Context, req *connect.Request[logdv1.CreateQueueGroupRequest]) (*connect.Response[logdv1.CreateQueueGroupResponse], error) {
	if err := f.enter(ctx, "CreateQueueGroup"); err != nil {
		return nil, err
	}
	m := req.Msg
	if m.GetGroup() == "" || strings.ContainsAny(m.GetGroup(), "/ \t\n") {
		return nil, invalid("invalid queue group name %q", m.GetGroup())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.topics[m.GetTopic()]
	if !ok {
		return nil, unknownTopic(m.GetTopic())
	}
	if _, ok := f.queues[queueKey(m.GetTopic(), m.GetGroup())]; ok {
		return nil, reasonError(connect.CodeAlreadyExists, logdv1.Reason_REASON_QUEUE_GROUP_EXISTS, "queue group %q on topic %q already exists", m.GetGroup(), m.GetTopic())
	}
	cfg := &logdv1.QueueGroupConfig{
		LeaseMs: proto.Int64(fakeQueueLease.Milliseconds()), MaxDeliveries: proto.Int32(fakeQueueMaxDeliveries),
		BackoffBaseMs: proto.Int64(fakeQueueBackoffBase.Milliseconds()), BackoffMaxMs: proto.Int64(fakeQueueBackoffMax.Milliseconds()),
		MaxInFlight: proto.Int32(fakeQueueMaxInFlight), AgeLimitMs: proto.Int64(0),
		DeadLetterTopic: proto.String(m.GetTopic() + "." + m.GetGroup() + ".dlq"), DeadlineHeader: proto.String(fakeQueueDeadline),
	}
	if err := mergeQueueConfig(cfg, m.GetConfig()); err != nil {
		return nil, err
	}
	if _, ok := f.topics[cfg.GetDeadLetterTopic()]; !ok {
		dt := &topic{info: &logdv1.TopicInfo{Name: cfg.GetDeadLetterTopic(), Partitions: t.info.GetPartitions(),
			Config: map[string]string{"retention.ms": "604800000"}, CreatedMs: f.now().UnixMilli()}}
		for range t.partitions {
			dt.partitions = append(dt.partitions, &partition{})
		}
		f.topics[cfg.GetDeadLetterTopic()] = dt
	}
	q := &queueGroup{topic: m.GetTopic(), name: m.GetGroup(), cfg: cfg, created: f.now()}
	for _, p := range t.partitions {
		qp := &queuePart{recs: map[int64]*queueEntry{}, done: map[int64]bool{}, acked: map[string]bool{}}
		if m.GetFromEnd() {
			qp.next, qp.start = p.end(), p.end()
		} else {
			qp.next, qp.start = p.logStart, p.logStart
		}
		q.parts = append(q.parts, qp)
	}
	if f.queues == nil {
		f.queues = map[string]*queueGroup{}
	}
	f.queues[queueKey(m.GetTopic(), m.GetGroup())] = q
	return connect.NewResponse(&logdv1.CreateQueueGroupResponse{Config: proto.Clone(cfg).(*logdv1.QueueGroupConfig)}), nil
}

// AlterQueueGroup implements logdv1connect.LogServiceHandler.
func (f *Fake) AlterQueueGroup(ctx context.Context, req *connect.Request[logdv1.AlterQueueGroupRequest]) (*connect.Response[logdv1.AlterQueueGroupResponse], error) {
	if err := f.enter(ctx, "AlterQueueGroup"); err != nil {
		return nil, err
	}
	m := req.Msg
	f.mu.Lock()
	defer f.mu.Unlock()
	q, err := f.queueGroupLocked(m.GetTopic(), m.GetGroup())
	if err != nil {
		return nil, err
	}
	if m.GetConfig().DeadLetterTopic != nil && m.GetConfig().GetDeadLetterTopic() != q.cfg.GetDeadLetterTopic() {
		return nil, invalid("the dead-letter topic cannot be changed")
	}
	if err := mergeQueueConfig(q.cfg, m.GetConfig()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&logdv1.AlterQueueGroupResponse{Config: proto.Clone(q.cfg).(*logdv1.QueueGroupConfig)}), nil
}

// PauseQueueGroup implements logdv1connect.LogServiceHandler.
func (f *Fake) PauseQueueGroup(ctx context.Context, req *connect.Request[logdv1.PauseQueueGroupRequest]) (*connect.Response[logdv1.PauseQueueGroupResponse], error) {
	if err := f.enter(ctx, "PauseQueueGroup"); err != nil {
		return nil, err
	}
	m := req.Msg
	f.mu.Lock()
	defer f.mu.Unlock()
	q, err := f.queueGroupLocked(m.GetTopic(), m.GetGroup())
	if err != nil {
		return nil, err
	}
	changed := q.paused != m.GetPaused()
	q.paused = m.GetPaused()
	if changed {
		f.notifyLocked()
	}
	return connect.NewResponse(&logdv1.PauseQueueGroupResponse{Paused: q.paused, Changed: changed}), nil
}

// DescribeQueueGroup implements logdv1connect.LogServiceHandler.
func (f *Fake) DescribeQueueGroup(ctx context.Context, req *connect.Request[logdv1.DescribeQueueGroupRequest]) (*connect.Response[logdv1.DescribeQueueGroupResponse], error) {
	if err := f.enter(ctx, "DescribeQueueGroup"); err != nil {
		return nil, err
	}
	m := req.Msg
	f.mu.Lock()
	defer f.mu.Unlock()
	q, err := f.queueGroupLocked(m.GetTopic(), m.GetGroup())
	if err != nil {
		return nil, err
	}
	now := f.now()
	f.expireLocked(q, now)
	t := f.topics[q.topic]
	resp := &logdv1.DescribeQueueGroupResponse{Topic: q.topic, Group: q.name, Config: proto.Clone(q.cfg).(*logdv1.QueueGroupConfig),
		CreatedMs: q.created.UnixMilli(), Paused: q.paused}
	for i, qp := range q.parts {
		p := t.partitions[i]
		st := &logdv1.QueuePartitionState{Partition: int32(i), DoneOffset: qp.start, NextOffset: qp.next, EndOffset: p.end(),
			Acked: qp.nAcked, DeadLettered: qp.nDead, Nacked: qp.nNack, Expired: qp.nExpd, Ready: p.end() - qp.next}
		var oldestReady, oldestLease time.Time
		if st.Ready > 0 {
			oldestReady = recordTime(p, qp.next)
		}
		inFlight := 0
		for _, off := range slices.Sorted(maps.Keys(qp.recs)) {
			e := qp.recs[off]
			switch {
			case e.inFlight(now):
				st.InFlight++
				inFlight++
				if oldestLease.IsZero() || e.last.Before(oldestLease) {
					oldestLease = e.last
				}
			case now.Before(e.availableAt):
				st.Delayed++
			default:
				st.Ready++
				if rt := recordTime(p, off); oldestReady.IsZero() || rt.Before(oldestReady) {
					oldestReady = rt
				}
			}
		}
		st.AtCap = st.Ready > 0 && inFlight >= int(q.cfg.GetMaxInFlight())
		if !oldestReady.IsZero() {
			st.OldestReadyAgeMs = max(now.Sub(oldestReady).Milliseconds(), 0)
		}
		if !oldestLease.IsZero() {
			st.OldestInFlightAgeMs = max(now.Sub(oldestLease).Milliseconds(), 0)
		}
		resp.Partitions = append(resp.Partitions, st)
	}
	if dt, ok := f.topics[q.cfg.GetDeadLetterTopic()]; ok {
		for _, p := range dt.partitions {
			resp.DeadLetterRecords += int64(len(p.records))
		}
	}
	return connect.NewResponse(resp), nil
}

// recordTime is a record's timestamp, or the zero time if retention took it.
func recordTime(p *partition, off int64) time.Time {
	if off < p.logStart || off >= p.end() {
		return time.Time{}
	}
	return time.UnixMilli(p.records[off-p.logStart].GetTimestampMs())
}

// finishLocked marks a record finished and advances the done offset.
func (qp *queuePart) finishLocked(off int64) {
	delete(qp.recs, off)
	qp.done[off] = true
	for qp.done[qp.start] {
		delete(qp.done, qp.start)
		qp.start++
	}
}

// deadLetterLocked appends the record to the dead-letter topic with the
// logd-dlq-* headers and finishes it, in one step as the server does.
func (f *Fake) deadLetterLocked(q *queueGroup, part int32, off int64, e *queueEntry, reason string, now time.Time) {
	src := f.topics[q.topic].partitions[part]
	rec := &logdv1.FetchedRecord{TimestampMs: now.UnixMilli()}
	if off >= src.logStart && off < src.end() {
		r := src.records[off-src.logStart]
		rec.Key, rec.Value = r.Key, r.Value
		rec.Headers = append(rec.Headers, r.GetHeaders()...)
	}
	add := func(k, v string) { rec.Headers = append(rec.Headers, &logdv1.Header{Key: k, Value: []byte(v)}) }
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	add("logd-dlq-reason", reason)
	if e.lastErr != "" {
		add("logd-dlq-error", e.lastErr)
	}
	add("logd-dlq-origin-topic", q.topic)
	add("logd-dlq-origin-partition", strconv.Itoa(int(part)))
	add("logd-dlq-origin-offset", strconv.FormatInt(off, 10))
	add("logd-dlq-group", q.name)
	add("logd-dlq-deliveries", strconv.Itoa(e.deliveries))
	if e.deliveries > 0 {
		add("logd-dlq-first-delivery", ts(e.first))
		add("logd-dlq-last-delivery", ts(e.last))
	}
	add("logd-dlq-time", ts(now))
	if dt, ok := f.topics[q.cfg.GetDeadLetterTopic()]; ok {
		dp := dt.partitions[int(part)%len(dt.partitions)]
		rec.Offset = dp.end()
		dp.records = append(dp.records, rec)
	}
	qp := q.parts[part]
	qp.nDead++
	qp.finishLocked(off)
	f.notifyLocked()
}

// expireLocked brings back expired leases, dead-lettering those whose last
// allowed delivery expired. It returns how many it dead-lettered.
func (f *Fake) expireLocked(q *queueGroup, now time.Time) int {
	dead := 0
	for i, qp := range q.parts {
		for _, off := range slices.Sorted(maps.Keys(qp.recs)) {
			e := qp.recs[off]
			if e.leaseUntil.IsZero() || now.Before(e.leaseUntil) {
				continue
			}
			e.leaseUntil, e.availableAt, e.expiredAt = time.Time{}, e.leaseUntil, e.leaseUntil
			qp.nExpd++
			if e.lastErr == "" {
				e.lastErr = "lease expired"
			}
			if e.deliveries >= int(q.cfg.GetMaxDeliveries()) {
				f.deadLetterLocked(q, int32(i), off, e, "max_deliveries", now)
				dead++
			}
		}
	}
	return dead
}

// Claim implements logdv1connect.LogServiceHandler, long polls included.
func (f *Fake) Claim(ctx context.Context, req *connect.Request[logdv1.ClaimRequest]) (*connect.Response[logdv1.ClaimResponse], error) {
	if err := f.enter(ctx, "Claim"); err != nil {
		return nil, err
	}
	m := req.Msg
	if m.GetMaxRecords() < 0 || m.GetMaxRecords() > 10000 || m.GetLeaseMs() < 0 || m.GetMaxWaitMs() < 0 {
		return nil, invalid("max records must be in [0, 10000] and durations not negative")
	}
	var deadline <-chan time.Time
	if m.GetMaxWaitMs() > 0 {
		t := time.NewTimer(time.Duration(m.GetMaxWaitMs()) * time.Millisecond)
		defer t.Stop()
		deadline = t.C
	}
	dead := 0
	for {
		resp, wait, err := f.claim(m)
		if err != nil {
			return nil, err
		}
		dead += int(resp.DeadLettered)
		resp.DeadLettered = int32(dead)
		if len(resp.Records) > 0 || deadline == nil || wait == nil {
			return connect.NewResponse(resp), nil
		}
		// Also look again now and then: leases and delays end by the
		// clock, not by a change.
		tick := time.NewTimer(10 * time.Millisecond)
		select {
		case <-wait:
		case <-tick.C:
		case <-deadline:
			deadline = nil
		case <-ctx.Done():
			tick.Stop()
			return nil, connect.NewError(connect.CodeCanceled, ctx.Err())
		}
		tick.Stop()
	}
}

// claim answers one claim from the current state.
func (f *Fake) claim(m *logdv1.ClaimRequest) (*logdv1.ClaimResponse, <-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q, err := f.queueGroupLocked(m.GetTopic(), m.GetGroup())
	if err != nil {
		return nil, nil, err
	}
	now := f.now()
	resp := &logdv1.ClaimResponse{DeadLettered: int32(f.expireLocked(q, now))}
	var wait <-chan struct{}
	if !f.closed {
		wait = f.changed
	}
	if q.paused {
		return resp, wait, nil
	}
	want := max(int(m.GetMaxRecords()), 1)
	lease := time.Duration(m.GetLeaseMs()) * time.Millisecond
	if lease == 0 {
		lease = time.Duration(q.cfg.GetLeaseMs()) * time.Millisecond
	}
	t := f.topics[q.topic]
	for i, qp := range q.parts {
		p := t.partitions[i]
		inFlight := 0
		var ready []int64
		for _, off := range slices.Sorted(maps.Keys(qp.recs)) {
			switch e := qp.recs[off]; {
			case e.inFlight(now):
				inFlight++
			case !now.Before(e.availableAt):
				ready = append(ready, off)
			}
		}
		// Records delivered before come first, then new ones in order.
		for len(resp.Records) < want {
			var off int64
			var e *queueEntry
			switch {
			case len(ready) > 0:
				off, ready = ready[0], ready[1:]
				e = qp.recs[off]
			case qp.next < p.end():
				off = max(qp.next, p.logStart)
				qp.next = off + 1
				e = &queueEntry{}
				qp.recs[off] = e
			default:
				off = -1
			}
			if off < 0 {
				break
			}
			if inFlight >= int(q.cfg.GetMaxInFlight()) {
				if e.deliveries == 0 {
					delete(qp.recs, off)
					qp.next = off
				}
				resp.AtCapPartitions = append(resp.AtCapPartitions, int32(i))
				break
			}
			r := p.records[off-p.logStart]
			if reason := f.undeliverable(q, r, now); reason != "" {
				f.deadLetterLocked(q, int32(i), off, e, reason, now)
				resp.DeadLettered++
				continue
			}
			e.deliveries++
			if e.deliveries == 1 {
				e.first = now
			}
			e.last, e.leaseUntil, e.expiredAt = now, now.Add(lease), time.Time{}
			inFlight++
			resp.Records = append(resp.Records, &logdv1.ClaimedRecord{
				Partition: int32(i), Offset: off, TimestampMs: r.GetTimestampMs(), Key: r.Key, Value: r.Value, Headers: r.GetHeaders(),
				Token: fakeToken(int32(i), off, e.deliveries), DeliveryCount: int32(e.deliveries),
				LeaseDeadlineMs: e.leaseUntil.UnixMilli(), FirstDeliveryMs: e.first.UnixMilli(),
			})
		}
	}
	return resp, wait, nil
}

// undeliverable returns the dead-letter reason of a record that must not
// be delivered: its deadline header passed, or it is older than the age
// limit.
func (f *Fake) undeliverable(q *queueGroup, r *logdv1.FetchedRecord, now time.Time) string {
	if h := q.cfg.GetDeadlineHeader(); h != "-" {
		for _, hd := range r.GetHeaders() {
			if hd.GetKey() != h {
				continue
			}
			v := string(hd.GetValue())
			var dl time.Time
			if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
				dl = time.UnixMilli(ms)
			} else if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
				dl = t
			}
			if !dl.IsZero() && !now.Before(dl) {
				return "deadline_exceeded"
			}
		}
	}
	if age := q.cfg.GetAgeLimitMs(); age > 0 && now.Sub(time.UnixMilli(r.GetTimestampMs())) >= time.Duration(age)*time.Millisecond {
		return "expired"
	}
	return ""
}

// fakeToken names one delivery: a record's partition, offset and delivery
// count, so each delivery has its own.
func fakeToken(part int32, off int64, delivery int) string {
	return fmt.Sprintf("fk.%d.%d.%d", part, off, delivery)
}

func parseFakeToken(s string) (part int32, off int64, delivery int, ok bool) {
	f := strings.Split(s, ".")
	if len(f) != 4 || f[0] != "fk" {
		return 0, 0, 0, false
	}
	p, err1 := strconv.ParseInt(f[1], 10, 32)
	o, err2 := strconv.ParseInt(f[2], 10, 64)
	d, err3 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, 0, false
	}
	return int32(p), o, d, true
}

// tokenOp applies op to each token's live delivery and builds the results;
// the call fails as a whole with REASON_STALE_TOKEN when no token was
// accepted and one was stale, as the server does.
func (f *Fake) tokenOp(topic, group string, tokens []string, op func(q *queueGroup, part int32, off int64, e *queueEntry, tr *logdv1.TokenResult, now time.Time)) ([]*logdv1.TokenResult, error) {
	if len(tokens) == 0 || len(tokens) > 10000 {
		return nil, invalid("%d tokens; want 1 to 10000", len(tokens))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	q, err := f.queueGroupLocked(topic, group)
	if err != nil {
		return nil, err
	}
	now := f.now()
	f.expireLocked(q, now)
	out := make([]*logdv1.TokenResult, len(tokens))
	accepted, stale, firstStale := 0, 0, ""
	for i, tok := range tokens {
		tr := &logdv1.TokenResult{Token: tok}
		out[i] = tr
		part, off, delivery, ok := parseFakeToken(tok)
		if !ok || int(part) >= len(q.parts) {
			tr.Error, tr.Message = logdv1.Reason_REASON_INVALID_ARGUMENT, fmt.Sprintf("malformed token %q", tok)
			continue
		}
		qp := q.parts[part]
		e := qp.recs[off]
		switch {
		case qp.acked[tok]:
			tr.Duplicate = true
			accepted++
			continue
		case e == nil || e.deliveries != delivery || !e.inFlight(now):
			tr.Error, tr.Message = logdv1.Reason_REASON_STALE_TOKEN, staleDetail(qp, off, e, delivery)
			stale++
			if firstStale == "" {
				firstStale = fmt.Sprintf("token %s: %s", tok, tr.Message)
			}
			continue
		}
		op(q, part, off, e, tr, now)
		accepted++
	}
	if accepted == 0 && stale > 0 {
		return nil, reasonError(connect.CodeFailedPrecondition, logdv1.Reason_REASON_STALE_TOKEN, "stale delivery token: %s", firstStale)
	}
	if accepted == 0 {
		return nil, invalid("no valid token: %s", out[0].GetMessage())
	}
	f.notifyLocked()
	return out, nil
}

// staleDetail says why a token is not the live delivery, as the server's
// messages do.
func staleDetail(qp *queuePart, off int64, e *queueEntry, delivery int) string {
	switch {
	case e == nil && (off < qp.start || qp.done[off]):
		return "record already finished"
	case e == nil:
		return "record was never delivered"
	case e.deliveries != delivery:
		return fmt.Sprintf("delivery %d was superseded by delivery %d", delivery, e.deliveries)
	case !e.expiredAt.IsZero():
		return "lease expired at " + e.expiredAt.UTC().Format(time.RFC3339Nano)
	}
	return "record is not in flight"
}

// Ack implements logdv1connect.LogServiceHandler.
func (f *Fake) Ack(ctx context.Context, req *connect.Request[logdv1.AckRequest]) (*connect.Response[logdv1.AckResponse], error) {
	if err := f.enter(ctx, "Ack"); err != nil {
		return nil, err
	}
	m := req.Msg
	rs, err := f.tokenOp(m.GetTopic(), m.GetGroup(), m.GetTokens(), func(q *queueGroup, part int32, off int64, _ *queueEntry, tr *logdv1.TokenResult, _ time.Time) {
		qp := q.parts[part]
		qp.acked[tr.Token] = true
		qp.nAcked++
		qp.finishLocked(off)
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&logdv1.AckResponse{Results: rs}), nil
}

// Nack implements logdv1connect.LogServiceHandler.
func (f *Fake) Nack(ctx context.Context, req *connect.Request[logdv1.NackRequest]) (*connect.Response[logdv1.NackResponse], error) {
	if err := f.enter(ctx, "Nack"); err != nil {
		return nil, err
	}
	m := req.Msg
	tokens := make([]string, len(m.GetNacks()))
	byToken := map[string]*logdv1.QueueNack{}
	for i, n := range m.GetNacks() {
		if n.DelayMs != nil && n.GetDelayMs() < 0 {
			return nil, invalid("negative delay")
		}
		tokens[i], byToken[n.GetToken()] = n.GetToken(), n
	}
	rs, err := f.tokenOp(m.GetTopic(), m.GetGroup(), tokens, func(q *queueGroup, part int32, off int64, e *queueEntry, tr *logdv1.TokenResult, now time.Time) {
		n := byToken[tr.Token]
		q.parts[part].nNack++
		e.lastErr, e.leaseUntil, e.expiredAt = n.GetError(), time.Time{}, time.Time{}
		switch {
		case n.GetPermanent():
			f.deadLetterLocked(q, part, off, e, "rejected", now)
			tr.DeadLettered = true
		case e.deliveries >= int(q.cfg.GetMaxDeliveries()):
			f.deadLetterLocked(q, part, off, e, "max_deliveries", now)
			tr.DeadLettered = true
		default:
			delay := time.Duration(n.GetDelayMs()) * time.Millisecond
			if n.DelayMs == nil {
				base := time.Duration(q.cfg.GetBackoffBaseMs()) * time.Millisecond
				delay = min(time.Duration(q.cfg.GetBackoffMaxMs())*time.Millisecond, base<<min(e.deliveries-1, 30))
			}
			e.availableAt = now.Add(delay)
			tr.AvailableAtMs = e.availableAt.UnixMilli()
		}
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&logdv1.NackResponse{Results: rs}), nil
}

// Extend implements logdv1connect.LogServiceHandler.
func (f *Fake) Extend(ctx context.Context, req *connect.Request[logdv1.ExtendRequest]) (*connect.Response[logdv1.ExtendResponse], error) {
	if err := f.enter(ctx, "Extend"); err != nil {
		return nil, err
	}
	m := req.Msg
	if m.GetLeaseMs() < 0 {
		return nil, invalid("negative lease")
	}
	rs, err := f.tokenOp(m.GetTopic(), m.GetGroup(), m.GetTokens(), func(q *queueGroup, _ int32, _ int64, e *queueEntry, tr *logdv1.TokenResult, now time.Time) {
		lease := time.Duration(m.GetLeaseMs()) * time.Millisecond
		if lease == 0 {
			lease = time.Duration(q.cfg.GetLeaseMs()) * time.Millisecond
		}
		e.leaseUntil = now.Add(lease)
		tr.LeaseDeadlineMs = e.leaseUntil.UnixMilli()
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&logdv1.ExtendResponse{Results: rs}), nil
}
