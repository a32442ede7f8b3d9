package server

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/internal/membudget"
	"github.com/logd-dev/logd/queue"
)

// Claim leases records to the caller. With max_wait_ms it long-polls: while
// nothing is claimable it waits for an append to the topic or for the
// earliest lease or backoff to end, without proposing empty claims.
func (s *Server) Claim(ctx context.Context, req *connect.Request[logdv1.ClaimRequest]) (*connect.Response[logdv1.ClaimResponse], error) {
	m := req.Msg
	if err := validateQueueNames(m.Topic, m.Group); err != nil {
		return nil, err
	}
	maxRecs := m.MaxRecords
	if maxRecs == 0 {
		maxRecs = 1
	}
	if maxRecs < 0 || maxRecs > backend.MaxQueueClaim {
		return nil, errInvalid("max_records %d outside [1, %d]", maxRecs, backend.MaxQueueClaim)
	}
	if m.LeaseMs < 0 || m.MaxBytes < 0 || m.MaxWaitMs < 0 {
		return nil, errInvalid("lease_ms, max_bytes and max_wait_ms must not be negative")
	}
	maxBytes := m.MaxBytes
	if maxBytes == 0 {
		maxBytes = DefaultClaimBytes
	}
	if mb := s.answers.maxAnswerBytes(); mb > 0 {
		maxBytes = int32(min(int64(maxBytes), mb))
	}
	wait := time.Duration(min(m.MaxWaitMs, MaxClaimWaitMs)) * time.Millisecond
	if len(m.Worker) > queue.MaxWorkerLen {
		return nil, errInvalid("worker id of %d bytes, at most %d", len(m.Worker), queue.MaxWorkerLen)
	}
	claim := backend.QueueClaim{Topic: m.Topic, Group: m.Group, Max: maxRecs, MaxBytes: maxBytes, Lease: msDur(m.LeaseMs), Worker: m.Worker}
	// Charged for the most it may build once records are claimable, not
	// while it waits for them; trimmed to what it built (answer_budget.go).
	var charge *membudget.Charge
	admit := func(ctx context.Context) error {
		if charge != nil {
			return nil
		}
		var err error
		charge, err = s.chargeAnswer(ctx, answerCost(int64(claim.MaxBytes)))
		return err
	}
	res, err := s.b.QueueClaimWait(ctx, claim, wait, admit)
	if err != nil {
		var ce *connect.Error
		if errors.As(err, &ce) {
			return nil, err
		}
		return nil, toConnectError(err)
	}
	var built int64
	for _, r := range res.Records {
		built += int64(len(r.Record.Key) + len(r.Record.Value))
	}
	charge.Trim(answerCost(built))
	s.metrics.records.WithLabelValues("claim").Add(float64(len(res.Records)))
	return connect.NewResponse(claimResponse(res)), nil
}

// claimResponse builds a claim's answer. The records' messages share one
// allocation, and so do their tokens (one string cut in pieces): a claim
// of hundreds of records makes the answer per record, and the allocations
// and their collection were a large part of a claim's cost
// (docs/performance.md, "Queue claim+ack").
func claimResponse(res backend.QueueClaimResult) *logdv1.ClaimResponse {
	out := &logdv1.ClaimResponse{AtCapPartitions: res.AtCap, DeadLettered: int32(res.DeadLettered), Records: make([]*logdv1.ClaimedRecord, len(res.Records)), Paused: res.Paused}
	buf := make([]byte, 0, len(res.Records)*32)
	ends := make([]int, len(res.Records))
	for i, r := range res.Records {
		buf = r.Token.Append(buf)
		ends[i] = len(buf)
	}
	tokens := string(buf)
	crs := make([]logdv1.ClaimedRecord, len(res.Records))
	from := 0
	for i, r := range res.Records {
		cr := &crs[i]
		cr.Partition, cr.Offset, cr.TimestampMs = r.Partition, r.Offset, r.Record.Timestamp
		cr.Key, cr.Value, cr.Token = r.Record.Key, r.Record.Value, tokens[from:ends[i]]
		cr.DeliveryCount, cr.LeaseDeadlineMs, cr.FirstDeliveryMs = int32(r.Deliveries), nsToMs(r.LeaseUntil), nsToMs(r.FirstDelivered)
		from = ends[i]
		for _, h := range r.Record.Headers {
			cr.Headers = append(cr.Headers, &logdv1.Header{Key: h.Key, Value: h.Value})
		}
		out.Records[i] = cr
	}
	return out
}
