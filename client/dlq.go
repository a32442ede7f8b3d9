package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// Dead-letter records. A queue group's dead-letter topic is an ordinary
// topic; the server's state machine adds the logd-dlq-* headers named below
// to each record it dead-letters. These helpers read them back and move
// records to their origin topic again (redrive).

// Dead-letter and redrive header names.
const (
	DLQHeaderReason         = "logd-dlq-reason"
	DLQHeaderError          = "logd-dlq-error"
	DLQHeaderOriginTopic    = "logd-dlq-origin-topic"
	DLQHeaderOriginPart     = "logd-dlq-origin-partition"
	DLQHeaderOriginOffset   = "logd-dlq-origin-offset"
	DLQHeaderGroup          = "logd-dlq-group"
	DLQHeaderDeliveries     = "logd-dlq-deliveries"
	DLQHeaderFirstDelivery  = "logd-dlq-first-delivery"
	DLQHeaderLastDelivery   = "logd-dlq-last-delivery"
	DLQHeaderIdempotencyKey = "logd-dlq-idempotency-key"
	DLQHeaderTime           = "logd-dlq-time"
	// DLQHeaderHistory holds the record's attempts as JSON
	// (DeadLetterHistory; docs/guide.md, "Work queues").
	DLQHeaderHistory = "logd-dlq-history"
	// RedriveHistoryHeader carries a redriven record's history back to its
	// origin, so that its next dead letter appends to it.
	RedriveHistoryHeader = "logd-redrive-history"
	// RedriveCountHeader on a redriven record says how often it was
	// redriven; it survives the next dead-lettering (headers are kept), so
	// the loop guard can count.
	RedriveCountHeader = "logd-redrive-count"
	// RedriveKeyHeader keeps the record's original idempotency key.
	RedriveKeyHeader = "logd-redrive-idempotency-key"
)

// DeadLetter is one record of a dead-letter topic, decoded.
type DeadLetter struct {
	// Where it is in the dead-letter topic.
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	// Reason: rejected, max_deliveries, deadline_exceeded, expired or
	// invalid_deadline.
	Reason    string `json:"reason"`
	LastError string `json:"last_error,omitempty"`
	// Origin of the record.
	OriginTopic     string    `json:"origin_topic"`
	OriginPartition int32     `json:"origin_partition"`
	OriginOffset    int64     `json:"origin_offset"`
	Group           string    `json:"group"`
	Deliveries      int       `json:"deliveries"`
	FirstDelivery   time.Time `json:"first_delivery,omitzero"`
	LastDelivery    time.Time `json:"last_delivery,omitzero"`
	DeadLettered    time.Time `json:"dead_lettered"`
	IdempotencyKey  string    `json:"idempotency_key,omitempty"`
	// Redrives is how often the record was redriven before.
	Redrives int `json:"redrives"`
	// History is each attempt, from the logd-dlq-history header (nil when
	// the dead letter has none: written before feature level 6);
	// HistoryJSON is that header as written.
	History     *DeadLetterHistory `json:"history,omitempty"`
	HistoryJSON []byte             `json:"-"`
	// Key, Value and Headers are the original record's (logd-dlq-*
	// headers removed).
	Key     []byte   `json:"key"`
	Value   []byte   `json:"value"`
	Headers []Header `json:"headers,omitempty"`
	// Redrive is the redrive job that moved the dead letter, or a running
	// one that will; nil when none did (or the node is older than this
	// field). The server derives it from the jobs it keeps and their
	// positions (docs/guide.md, "Redriven dead letters").
	Redrive *DeadLetterRedrive `json:"redrive,omitempty"`
}

// DeadLetterRedrive is the redrive job that moved a dead letter.
type DeadLetterRedrive struct {
	// Job is the job's id (RedriveJob.ID).
	Job string `json:"job"`
	// Pending: the job runs and has not reached the dead letter yet.
	Pending bool `json:"pending"`
	// At is the job's last update, at or after the move; zero while
	// pending.
	At time.Time `json:"at,omitzero"`
}

// DeadLetterHistory is the logd-dlq-history header: a dead letter's
// attempts, oldest first.
type DeadLetterHistory struct {
	Version  int                 `json:"version"`
	Attempts []DeadLetterAttempt `json:"attempts"`
	// DroppedAttempts counts older attempts left out (a record keeps its
	// last 10, a history across redrives its last 20).
	DroppedAttempts int `json:"dropped_attempts,omitempty"`
	// PreviousUnreadable: the history a redrive carried was not readable.
	PreviousUnreadable bool `json:"previous_unreadable,omitempty"`
}

// DeadLetterAttempt is one delivery of a record, or a claim's decision not
// to deliver it (outcomes deadline_exceeded, expired, invalid_deadline).
type DeadLetterAttempt struct {
	Delivery   int       `json:"delivery"`
	Claimed    time.Time `json:"claimed"`
	Worker     string    `json:"worker,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	Extensions int       `json:"extensions"`
	Ended      time.Time `json:"ended,omitzero"`
	// Outcome: acked, nacked, rejected, lease_expired, deadline_exceeded,
	// expired or invalid_deadline.
	Outcome string `json:"outcome"`
	// Error is the nack's text (at most 1 KiB: ErrorTruncated marks a cut
	// one; ErrorDropped one dropped for the group's history budget).
	Error          string `json:"error,omitempty"`
	ErrorTruncated bool   `json:"error_truncated,omitempty"`
	ErrorDropped   bool   `json:"error_dropped,omitempty"`
	// Redrive is the record's redrive count when the attempt ran.
	Redrive int `json:"redrive"`
}

// ParseDeadLetter decodes a record of a dead-letter topic; ok is false for
// a record without the dead-letter headers (a reason and an origin topic,
// as a redrive job reads them).
func ParseDeadLetter(r FetchedRecord) (DeadLetter, bool) {
	d := DeadLetter{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, DeadLettered: r.Timestamp}
	atoi := func(b []byte) int64 { v, _ := strconv.ParseInt(string(b), 10, 64); return v }
	tm := func(b []byte) time.Time { t, _ := time.Parse(time.RFC3339Nano, string(b)); return t }
	for _, h := range r.Headers {
		if !strings.HasPrefix(h.Key, "logd-dlq-") {
			if h.Key == RedriveCountHeader {
				d.Redrives = int(atoi(h.Value))
			}
			d.Headers = append(d.Headers, h)
			continue
		}
		switch h.Key {
		case DLQHeaderReason:
			d.Reason = string(h.Value)
		case DLQHeaderError:
			d.LastError = string(h.Value)
		case DLQHeaderOriginTopic:
			d.OriginTopic = string(h.Value)
		case DLQHeaderOriginPart:
			d.OriginPartition = int32(atoi(h.Value))
		case DLQHeaderOriginOffset:
			d.OriginOffset = atoi(h.Value)
		case DLQHeaderGroup:
			d.Group = string(h.Value)
		case DLQHeaderDeliveries:
			d.Deliveries = int(atoi(h.Value))
		case DLQHeaderFirstDelivery:
			d.FirstDelivery = tm(h.Value)
		case DLQHeaderLastDelivery:
			d.LastDelivery = tm(h.Value)
		case DLQHeaderIdempotencyKey:
			d.IdempotencyKey = string(h.Value)
		case DLQHeaderTime:
			d.DeadLettered = tm(h.Value)
		case DLQHeaderHistory:
			var hist DeadLetterHistory
			if json.Unmarshal(h.Value, &hist) == nil {
				d.History = &hist
			}
			d.HistoryJSON = h.Value
		}
	}
	return d, d.Reason != "" && d.OriginTopic != ""
}

// DeadLetterFilter selects dead letters; zero fields select everything.
// A redrive job (StartRedrive) and ListDeadLetters hand it to the server,
// which selects with the job's own filter: dead-lettering times to the
// millisecond.
type DeadLetterFilter struct {
	// Reasons: any of these.
	Reasons []string `json:"reasons,omitempty"`
	// Since and Until bound the dead-lettering time: [Since, Until).
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
	// Key: the record key equals it.
	Key string `json:"key,omitempty"`
	// NotRedriven leaves out the dead letters a redrive job moved or
	// will (DeadLetter.Redrive set). ListDeadLetters only: a redrive job
	// ignores it (it finds what an earlier job moved a duplicate anyway),
	// and a node before it lists them all.
	NotRedriven bool `json:"-"`
}

// Match reports whether d passes the filter, reading times to the
// millisecond as the server does. ListDeadLetters uses it only against a
// node without the ListDeadLetters RPC (it selects on the server
// otherwise), for dead letters it read itself.
func (f DeadLetterFilter) Match(d DeadLetter) bool {
	at := d.DeadLettered.UnixMilli()
	switch {
	case len(f.Reasons) > 0 && !slices.Contains(f.Reasons, d.Reason):
		return false
	case !f.Since.IsZero() && at < f.Since.UnixMilli():
		return false
	case !f.Until.IsZero() && at >= f.Until.UnixMilli():
		return false
	case f.Key != "" && string(d.Key) != f.Key:
		return false
	}
	return true
}

// ListDeadLetters calls fn for every dead letter of topic (a dead-letter
// topic) that passes the filter, partition by partition in offset order,
// up to the end offsets when it started. fn returning an error stops the
// listing with that error.
//
// The server selects them (its ListDeadLetters RPC) with a redrive job's
// own reader and filter, so the list is what a redrive with the same
// filter moves; its times are to the millisecond. The client asks page by
// page, each page continuing where the last stopped. Against a node
// without that RPC (a build before it, answering Unimplemented) it reads
// the topic and filters here with DeadLetterFilter.Match, from where the
// server stopped if an earlier page was answered.
func (c *Client) ListDeadLetters(ctx context.Context, topic string, f DeadLetterFilter, fn func(DeadLetter) error) error {
	req := &logdv1.ListDeadLettersRequest{Topic: topic, Reasons: f.Reasons, NotRedriven: f.NotRedriven}
	if f.Key != "" {
		req.Key, req.HasKey = []byte(f.Key), true
	}
	if !f.Since.IsZero() {
		req.SinceMs = f.Since.UnixMilli()
	}
	if !f.Until.IsZero() {
		req.UntilMs = f.Until.UnixMilli()
	}
	for {
		var resp *logdv1.ListDeadLettersResponse
		err := c.do(ctx, "ListDeadLetters", retryAny, c.opts.Timeout, func(ctx context.Context) error {
			r, err := c.rpc.ListDeadLetters(ctx, connect.NewRequest(req))
			if err != nil {
				return fromRPC(err)
			}
			resp = r.Msg
			return nil
		})
		if connect.CodeOf(err) == connect.CodeUnimplemented {
			return c.listDeadLettersHere(ctx, topic, f, req.FromOffsets, req.ToOffsets, fn)
		}
		if err != nil {
			return fmt.Errorf("list dead letters of %s: %w", topic, err)
		}
		for _, m := range resp.DeadLetters {
			if err := fn(deadLetterFrom(topic, m)); err != nil {
				return err
			}
		}
		if !resp.Truncated {
			return nil
		}
		if len(resp.NextOffsets) == 0 {
			return fmt.Errorf("list dead letters of %s: the server cut its answer short without saying where it stopped", topic)
		}
		if len(resp.DeadLetters) == 0 && slices.Equal(resp.NextOffsets, req.FromOffsets) {
			// Asking again would get the same answer, forever.
			return fmt.Errorf("list dead letters of %s: the server cut its answer short without moving on from %v", topic, resp.NextOffsets)
		}
		req.FromOffsets, req.ToOffsets = resp.NextOffsets, resp.EndOffsets
	}
}

// deadLetterFrom converts a dead letter the server decoded.
func deadLetterFrom(topic string, m *logdv1.DeadLetter) DeadLetter {
	ms := func(v int64) time.Time { return msToTime(v).UTC() } // UTC, as the headers' times parse
	d := DeadLetter{Topic: topic, Partition: m.Partition, Offset: m.Offset, Reason: m.Reason, LastError: m.Error,
		OriginTopic: m.OriginTopic, OriginPartition: m.OriginPartition, OriginOffset: m.OriginOffset, Group: m.Group,
		Deliveries: int(m.Deliveries), FirstDelivery: ms(m.FirstDeliveryMs), LastDelivery: ms(m.LastDeliveryMs),
		DeadLettered: ms(m.DeadLetteredMs), IdempotencyKey: m.IdempotencyKey, Redrives: int(m.Redrives), Key: m.Key, Value: m.Value}
	if m.History != "" {
		d.HistoryJSON = []byte(m.History)
		var hist DeadLetterHistory
		if json.Unmarshal(d.HistoryJSON, &hist) == nil {
			d.History = &hist
		}
	}
	for _, h := range m.Headers {
		d.Headers = append(d.Headers, Header{Key: h.Key, Value: h.Value})
	}
	if m.RedriveJob != "" {
		d.Redrive = &DeadLetterRedrive{Job: m.RedriveJob, Pending: m.RedrivePending}
		if !m.RedrivePending {
			d.Redrive.At = ms(m.RedriveMs)
		}
	}
	return d
}

// listDeadLettersHere is ListDeadLetters read and filtered by the client,
// for a node without the RPC: each partition from its log start (or
// from[i]) to its end offset now (or to[i]).
func (c *Client) listDeadLettersHere(ctx context.Context, topic string, f DeadLetterFilter, from, to []int64, fn func(DeadLetter) error) error {
	desc, err := c.DescribeTopic(ctx, topic)
	if err != nil {
		return err
	}
	for _, p := range desc.Partitions {
		start, end := p.LogStart, p.End
		if i := int(p.Partition); i < len(from) && i < len(to) {
			start, end = max(start, from[i]), min(end, to[i])
		}
		err := c.scanDeadLetters(ctx, topic, p.Partition, start, end, func(d DeadLetter) error {
			if !f.Match(d) {
				return nil
			}
			return fn(d)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// scanDeadLetters reads [from, end) of a partition; records without the
// dead-letter headers are skipped.
func (c *Client) scanDeadLetters(ctx context.Context, topic string, partition int32, from, end int64, fn func(DeadLetter) error) error {
	for off := from; off < end; {
		resp, err := c.Fetch(ctx, FetchRequest{Topic: topic, Partition: partition, Offset: off})
		var oor *OutOfRangeError
		if errors.As(err, &oor) && oor.LogStart > off {
			off = oor.LogStart // retention moved on
			continue
		}
		if err != nil {
			return err
		}
		for _, r := range resp.Records {
			if r.Offset >= end {
				return nil
			}
			if d, ok := ParseDeadLetter(r); ok {
				if err := fn(d); err != nil {
					return err
				}
			}
		}
		if resp.Next <= off {
			return nil
		}
		off = resp.Next
	}
	return nil
}
