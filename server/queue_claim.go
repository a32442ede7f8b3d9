package server

import (
	"context"
	"math"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/replication"
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
	if maxRecs < 0 || maxRecs > replication.MaxQueueClaim {
		return nil, errInvalid("max_records %d outside [1, %d]", maxRecs, replication.MaxQueueClaim)
	}
	if m.LeaseMs < 0 || m.MaxBytes < 0 || m.MaxWaitMs < 0 {
		return nil, errInvalid("lease_ms, max_bytes and max_wait_ms must not be negative")
	}
	maxBytes := m.MaxBytes
	if maxBytes == 0 {
		maxBytes = DefaultClaimBytes
	}
	wait := time.Duration(min(m.MaxWaitMs, MaxClaimWaitMs)) * time.Millisecond
	claim := replication.QueueClaim{Topic: m.Topic, Group: m.Group, Max: maxRecs, MaxBytes: maxBytes, Lease: msDur(m.LeaseMs)}
	deadline := time.Now().Add(wait)
	for {
		if err := s.waitClaimable(ctx, m.Topic, m.Group, deadline); err != nil {
			return nil, err
		}
		res, err := s.node.QueueClaim(ctx, claim)
		if err != nil {
			return nil, toConnectError(err)
		}
		if len(res.Records) > 0 || len(res.AtCap) > 0 || !time.Now().Before(deadline) {
			s.metrics.records.WithLabelValues("claim").Add(float64(len(res.Records)))
			return connect.NewResponse(claimResponse(res)), nil
		}
	}
}

// waitClaimable returns once a claim could deliver something, or at the
// deadline; it wakes on appends to the topic and at the group's earliest
// lease or backoff end.
func (s *Server) waitClaimable(ctx context.Context, topic, name string, deadline time.Time) error {
	t, err := s.node.FSM().Topic(topic)
	if err != nil {
		return toConnectError(err)
	}
	for {
		// Subscribe before checking, so an append in between wakes us.
		chans := make([]<-chan struct{}, len(t.Partitions))
		for i, p := range t.Partitions {
			chans[i] = p.Changed()
		}
		// The node's clock stamps the claim, so it decides what is due;
		// the wait itself is on the wall clock (the same one in production).
		now, nodeNow := time.Now(), s.node.Now()
		ok, wake, err := s.node.FSM().QueueClaimable(topic, name, nodeNow.UnixNano())
		if err != nil {
			return toConnectError(err)
		}
		if ok || !now.Before(deadline) {
			return nil
		}
		until := deadline
		if wake != math.MaxInt64 {
			until = now.Add(time.Duration(wake - nodeNow.UnixNano()))
			if until.After(deadline) {
				until = deadline
			}
		}
		timer := time.NewTimer(time.Until(until))
		if err := waitAny(ctx, chans, timer.C); err != nil {
			timer.Stop()
			return toConnectError(err)
		}
		timer.Stop()
	}
}

// waitAny waits for one of the partition channels, the timer or ctx.
func waitAny(ctx context.Context, chans []<-chan struct{}, timer <-chan time.Time) error {
	if len(chans) == 1 {
		select {
		case <-chans[0]:
		case <-timer:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	// Fan in with one goroutine per partition; all end when this returns.
	done := make(chan struct{})
	woke := make(chan struct{}, 1)
	defer close(done)
	for _, c := range chans {
		go func() {
			select {
			case <-c:
				select {
				case woke <- struct{}{}:
				default:
				}
			case <-done:
			}
		}()
	}
	select {
	case <-woke:
	case <-timer:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func claimResponse(res replication.QueueClaimResult) *logdv1.ClaimResponse {
	out := &logdv1.ClaimResponse{AtCapPartitions: res.AtCap, DeadLettered: int32(res.DeadLettered), Records: make([]*logdv1.ClaimedRecord, len(res.Records))}
	for i, r := range res.Records {
		cr := &logdv1.ClaimedRecord{
			Partition: r.Partition, Offset: r.Offset, TimestampMs: r.Record.Timestamp,
			Key: r.Record.Key, Value: r.Record.Value, Token: r.Token.String(),
			DeliveryCount: int32(r.Deliveries), LeaseDeadlineMs: nsToMs(r.LeaseUntil), FirstDeliveryMs: nsToMs(r.FirstDelivered),
		}
		for _, h := range r.Record.Headers {
			cr.Headers = append(cr.Headers, &logdv1.Header{Key: h.Key, Value: h.Value})
		}
		out.Records[i] = cr
	}
	return out
}
