package server

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/partition"
)

// Bounds of a ListDeadLetters call: the dead letters answered and the
// records read.
const (
	defaultDeadLetters = 1000
	maxDeadLetters     = 10_000
	defaultDeadScan    = 100_000
	maxDeadScan        = 1_000_000
	defaultDeadBytes   = 4 << 20
	maxDeadBytes       = 16 << 20
	deadLetterRead     = 1 << 20
)

// deadLetterBounds are a call's bounds and what it used of them.
type deadLetterBounds struct {
	records int
	scan    int64
	bytes   int
	used    int // bytes answered
}

// full reports whether resp reached a bound.
func (b *deadLetterBounds) full(resp *logdv1.ListDeadLettersResponse) bool {
	return len(resp.DeadLetters) >= b.records || resp.Scanned >= b.scan || len(resp.DeadLetters) > 0 && b.used >= b.bytes
}

// ListDeadLetters reads a dead-letter topic from each partition's start
// (or from_offset) to its end offset now (or to_offset), and answers the
// dead letters a redrive job with the same filters would select, decoded
// by the job's own reader (backend.ParseDeadLetter, RedriveMatch), so
// what the console lists is what a redrive moves. A truncated answer says
// where each partition's read stopped (next_offsets) and up to where it
// reads (end_offsets), so a client lists the rest with further calls.
// Each dead letter says which redrive job moved it or will (redriveMarks),
// and not_redriven leaves those out.
func (s *Server) ListDeadLetters(ctx context.Context, req *connect.Request[logdv1.ListDeadLettersRequest]) (*connect.Response[logdv1.ListDeadLettersResponse], error) {
	m := req.Msg
	if err := partition.ValidateTopicName(m.Topic); err != nil {
		return nil, errInvalid("topic: %v", err)
	}
	switch {
	case m.FromOffset < 0 || m.ToOffset < 0 || m.ToOffset != 0 && m.ToOffset <= m.FromOffset:
		return nil, errInvalid("offset range [%d, %d) is empty or negative (to_offset 0: no bound)", m.FromOffset, m.ToOffset)
	case m.SinceMs < 0 || m.UntilMs < 0 || m.UntilMs != 0 && m.UntilMs <= m.SinceMs:
		return nil, errInvalid("time range [%d, %d) ms is empty or negative", m.SinceMs, m.UntilMs)
	case m.MaxRedrives < 0 || m.MaxRecords < 0 || m.MaxRecords > maxDeadLetters || m.MaxScan < 0 || m.MaxScan > maxDeadScan ||
		m.MaxBytes < 0 || m.MaxBytes > maxDeadBytes:
		return nil, errInvalid("want max_redrives >= 0, max_records in [0, %d], max_scan in [0, %d], max_bytes in [0, %d]",
			maxDeadLetters, maxDeadScan, maxDeadBytes)
	}
	t, err := s.b.DescribeTopic(m.Topic)
	if err != nil {
		return nil, toConnectError(err)
	}
	if len(m.FromOffsets) > len(t.Partitions) || len(m.ToOffsets) > len(t.Partitions) ||
		slices.ContainsFunc(m.FromOffsets, negative) || slices.ContainsFunc(m.ToOffsets, negative) {
		return nil, errInvalid("from_offsets and to_offsets: want at most one offset >= 0 per partition (%d)", len(t.Partitions))
	}
	spec := backend.RedriveSpec{Reasons: m.Reasons, Key: string(m.Key), HasKey: m.HasKey, SinceMs: m.SinceMs, UntilMs: m.UntilMs,
		MaxRedrives: int(m.MaxRedrives)}
	if spec.MaxRedrives == 0 {
		spec.MaxRedrives = backend.DefaultMaxRedrives
	}
	bounds := &deadLetterBounds{records: int(m.MaxRecords), scan: int64(m.MaxScan), bytes: int(m.MaxBytes)}
	if bounds.records == 0 {
		bounds.records = defaultDeadLetters
	}
	if bounds.scan == 0 {
		bounds.scan = defaultDeadScan
	}
	if bounds.bytes == 0 {
		bounds.bytes = defaultDeadBytes
	}
	// No larger than the budget charges one answer, as a fetch: a small
	// budget would otherwise hold less than the answer it lets build.
	if mb := s.answers.maxAnswerBytes(); mb > 0 {
		bounds.bytes = int(min(int64(bounds.bytes), mb))
	}
	// Charged for the most it may build, trimmed to what it built
	// (answer_budget.go).
	charge, err := s.chargeAnswer(ctx, answerCost(int64(bounds.bytes)))
	if err != nil {
		return nil, err
	}
	sel := deadLetterSelection{spec: spec, marks: s.redriveMarksOf(m.Topic), notRedriven: m.NotRedriven}
	resp := &logdv1.ListDeadLettersResponse{}
	defer func() { charge.Trim(answerCost(int64(proto.Size(resp)))) }()
	for i, p := range t.Partitions {
		from, end := max(p.LogStartOffset, m.FromOffset), p.EndOffset
		if m.ToOffset > 0 {
			end = min(end, m.ToOffset)
		}
		if i < len(m.FromOffsets) {
			from = max(from, m.FromOffsets[i])
		}
		if i < len(m.ToOffsets) {
			end = min(end, m.ToOffsets[i])
		}
		resp.Total += max(0, end-from)
		off := min(from, end)
		for off < end {
			if bounds.full(resp) {
				resp.Truncated = true
				break
			}
			if err := ctx.Err(); err != nil {
				return nil, toConnectError(err)
			}
			next, err := s.readDeadLetters(m.Topic, p.Partition, off, end, sel, bounds, resp)
			if err != nil {
				return nil, toConnectError(err)
			}
			if next <= off {
				break
			}
			off = next
		}
		resp.NextOffsets = append(resp.NextOffsets, off)
		resp.EndOffsets = append(resp.EndOffsets, end)
	}
	return connect.NewResponse(resp), nil
}

func negative(v int64) bool { return v < 0 }

// deadLetterSelection is what a ListDeadLetters call selects: a redrive
// job's filters, and whether dead letters a job moved are left out.
type deadLetterSelection struct {
	spec        backend.RedriveSpec
	marks       redriveMarks
	notRedriven bool
}

// readDeadLetters reads one batch of a partition at off (below end),
// adds what it selects to resp, and returns the offset to read next.
func (s *Server) readDeadLetters(topic string, part int32, off, end int64, sel deadLetterSelection, bounds *deadLetterBounds, resp *logdv1.ListDeadLettersResponse) (int64, error) {
	r, err := s.b.Read(topic, part, off, deadLetterRead)
	var oor *backend.OutOfRangeError
	if errors.As(err, &oor) && off < oor.Start {
		return min(oor.Start, end), nil // retention moved on
	}
	if err != nil {
		return off, err
	}
	if len(r.Batches) == 0 {
		return off, nil
	}
	recs, err := batch.Records(r.Batches, off, 0)
	if err != nil {
		return off, fmt.Errorf("%s-%d at %d: %w", topic, part, off, errors.Join(errCorruptRead, err))
	}
	next := off
	for _, rec := range recs {
		if rec.Offset >= end || bounds.full(resp) {
			break
		}
		next = rec.Offset + 1
		resp.Scanned++
		d := backend.ParseDeadLetter(rec)
		if !d.IsDeadLetter() || !backend.RedriveMatch(sel.spec, d, rec.Key) {
			continue
		}
		dl := deadLetterProto(part, rec, d, sel.spec.MaxRedrives)
		sel.marks.mark(dl, d, rec.Key)
		if sel.notRedriven && dl.RedriveJob != "" {
			continue
		}
		resp.DeadLetters = append(resp.DeadLetters, dl)
		bounds.used += len(rec.Key) + len(rec.Value)
		for _, h := range rec.Headers {
			bounds.used += len(h.Key) + len(h.Value)
		}
	}
	if next == off && len(recs) > 0 && recs[0].Offset > off {
		next = min(recs[0].Offset, end) // a gap compaction left
	}
	return next, nil
}

func deadLetterProto(part int32, r batch.Record, d backend.DeadLetter, maxRedrives int) *logdv1.DeadLetter {
	out := &logdv1.DeadLetter{Partition: part, Offset: r.Offset, Reason: d.Reason, Error: d.Error,
		OriginTopic: d.OriginTopic, OriginPartition: d.OriginPartition, OriginOffset: d.OriginOffset, Group: d.Group,
		Deliveries: int32(d.Deliveries), FirstDeliveryMs: d.FirstDeliveryMs, LastDeliveryMs: d.LastDeliveryMs, DeadLetteredMs: d.DeadLetteredMs,
		IdempotencyKey: d.IdempotencyKey, Redrives: int32(d.Redrives), Refused: d.Redrives >= maxRedrives, History: string(d.History),
		Key: r.Key, Value: r.Value}
	for _, h := range d.Headers {
		out.Headers = append(out.Headers, &logdv1.Header{Key: h.Key, Value: h.Value})
	}
	return out
}
