package replication

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/replication/fsm"
)

// DeadLetter is a record of a dead-letter topic as the state machine wrote
// it (fsm's logd-dlq-* headers, README.md "Work queues"), decoded the way
// a redrive job reads it: the job's selection (RedriveMatch) and the
// console's list (server's ListDeadLetters) read the same fields.
type DeadLetter struct {
	// Reason: rejected, max_deliveries, deadline_exceeded, expired or
	// invalid_deadline; Error the last nack's text.
	Reason string
	Error  string
	// The record's origin; HasOrigin when both topic and partition are
	// readable (a redrive to the origin needs them).
	OriginTopic     string
	OriginPartition int32
	OriginOffset    int64
	HasOrigin       bool
	Group           string
	Deliveries      int
	// Times in Unix milliseconds (0 unknown); DeadLetteredMs falls back to
	// the record's timestamp.
	FirstDeliveryMs int64
	LastDeliveryMs  int64
	DeadLetteredMs  int64
	IdempotencyKey  string
	// Redrives is how often the record was redriven before.
	Redrives int
	// History is the logd-dlq-history header as written (JSON).
	History []byte
	// Headers are the record's own: every header but logd-dlq-*.
	Headers []batch.Header

	originalKey    string
	hasOriginalKey bool
}

// IsDeadLetter reports whether the record carried a reason and an origin
// topic: a record of a dead-letter topic that a queue group wrote.
func (d DeadLetter) IsDeadLetter() bool { return d.Reason != "" && d.OriginTopic != "" }

// ParseDeadLetter decodes a record of a dead-letter topic; unreadable
// headers leave their fields zero.
func ParseDeadLetter(r batch.Record) DeadLetter {
	d := DeadLetter{DeadLetteredMs: r.Timestamp}
	var part, topic bool
	ms := func(v string) int64 {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t.UnixMilli()
		}
		return 0
	}
	for _, h := range r.Headers {
		v := string(h.Value)
		if !strings.HasPrefix(h.Key, "logd-dlq-") {
			d.Headers = append(d.Headers, h)
		}
		switch h.Key {
		case fsm.DLQHeaderReason:
			d.Reason = v
		case fsm.DLQHeaderError:
			d.Error = v
		case fsm.DLQHeaderTopic:
			d.OriginTopic, topic = v, true
		case fsm.DLQHeaderPartition:
			if p, err := strconv.ParseInt(v, 10, 32); err == nil && p >= 0 {
				d.OriginPartition, part = int32(p), true
			}
		case fsm.DLQHeaderOffset:
			if o, err := strconv.ParseInt(v, 10, 64); err == nil && o >= 0 {
				d.OriginOffset = o
			}
		case fsm.DLQHeaderGroup:
			d.Group = v
		case fsm.DLQHeaderDeliveries:
			if n, err := strconv.Atoi(v); err == nil && n >= 0 {
				d.Deliveries = n
			}
		case fsm.DLQHeaderFirstDelivery:
			d.FirstDeliveryMs = ms(v)
		case fsm.DLQHeaderLastDelivery:
			d.LastDeliveryMs = ms(v)
		case fsm.DLQHeaderDeadLetteredAt:
			if t := ms(v); t != 0 {
				d.DeadLetteredMs = t
			}
		case redriveCountHeader:
			if c, err := strconv.Atoi(v); err == nil && c >= 0 {
				d.Redrives = c
			}
		case fsm.DLQHeaderHistory:
			d.History = h.Value
		case fsm.DLQHeaderIdempotencyKey:
			d.IdempotencyKey = v
		case redriveKeyHeader:
			d.originalKey, d.hasOriginalKey = v, true
		}
	}
	d.HasOrigin = topic && part
	return d
}

// RedriveMatch reports whether a job of spec s selects the dead letter d
// with key by its filters (reasons, key, dead-lettering time); the offset
// bounds and the named records are the job's position's business, the
// loop guard (Redrives against MaxRedrives) comes after.
func RedriveMatch(s RedriveSpec, d DeadLetter, key []byte) bool {
	switch {
	case s.HasKey && string(key) != s.Key:
		return false
	case len(s.Reasons) > 0 && !slices.Contains(s.Reasons, d.Reason):
		return false
	case s.SinceMs > 0 && d.DeadLetteredMs < s.SinceMs:
		return false
	case s.UntilMs > 0 && d.DeadLetteredMs >= s.UntilMs:
		return false
	}
	return true
}
