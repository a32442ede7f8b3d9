package backend

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/logd-dev/logd/batch"
)

// ProduceRequest is one produce call: records for one topic, appended
// whole or not at all.
type ProduceRequest struct {
	Topic   string
	Records []ProduceRecord
	// Producer, if set, makes the call an idempotent producer's: the
	// records of each partition are one batch carrying the producer's id,
	// epoch and that partition's first sequence, judged by the
	// partition's producer state as a Kafka producer's batch is
	// (docs/kafka.md, "Idempotent producers"). A refused batch fails only
	// its partition (*PartialAppendError's errors); a batch that repeats
	// one of the producer's last ones is answered with its original
	// offsets, marked Duplicate. Every record then names its partition or
	// has a key, and none has an IdempotencyKey.
	Producer *ProducerSequence `json:",omitempty"`
}

// ProducerSequence is an idempotent producer's identity on a produce call.
type ProducerSequence struct {
	// ID comes from InitProducerID; Epoch is its epoch or one the
	// producer raised itself (starting its sequences at 0 again).
	ID    int64
	Epoch int16
	// BaseSequences holds, for each partition the call's records go to
	// and only those, the sequence of its first record there.
	BaseSequences map[int32]int32
}

// ProduceRecord is one record of a produce call. Produce reads it only
// during the call and keeps no reference to it or its slices.
type ProduceRecord struct {
	// Partition is the record's partition if HasPartition; otherwise a
	// keyed record goes to murmur2 of its key (as Kafka's partitioner) and
	// a keyless one to the topic's next partition in round-robin order.
	Partition    int32
	HasPartition bool
	// TimestampMs is milliseconds since the Unix epoch; 0 means the time
	// the call is routed. Negative is invalid.
	TimestampMs int64
	// Key is nil for a keyless record (an empty key is a key).
	Key     []byte
	Value   []byte
	Headers []batch.Header
	// IdempotencyKey, if set, makes the record idempotent within the
	// topic's window: a repeat with the same payload (key, value,
	// headers) is answered with the original partition and offset.
	IdempotencyKey string
}

// RecordResult is where one record of a produce call is.
type RecordResult struct {
	Partition int32
	Offset    int64
	// Duplicate: the record repeats an idempotency key (in the window, or
	// earlier in the same call) and was not appended again.
	Duplicate bool
}

// ProduceResult answers a produce call.
type ProduceResult struct {
	// Results[i] is where request record i is.
	Results []RecordResult
	// Appended and Bytes count the records appended by this call and the
	// size of their batches; Duplicates the records answered from the
	// topic's idempotency window. For metrics.
	Appended, Bytes, Duplicates int
	// CommitTime is the time from proposing the append to its commit and
	// apply (0 when nothing was appended).
	CommitTime time.Duration
	// Incarnation is the topic's CreateIndex when the topic is placed on
	// data groups (0 when the meta group holds it): a node that forwarded
	// the call learns from it, with Results, what its reads through it
	// must see (read your writes, docs/architecture.md "Read guarantees").
	Incarnation uint64
	// ProducerChecked is set when the request's Producer was judged. A
	// node of an earlier build that answers a call forwarded to it
	// ignores the Producer and leaves it false.
	ProducerChecked bool `json:",omitempty"`
}

// ReadResult is what Read returns: stored bytes and the partition's bounds
// after reading them.
type ReadResult struct {
	// Batches holds whole Kafka RecordBatch v2 batches exactly as stored,
	// starting with the one that holds the requested offset (which may
	// begin below it), each with a verified CRC. It is a copy the caller
	// owns: retention or compaction may delete the segments it came from
	// at once, and nothing needs releasing. Empty at the end of the log.
	Batches []byte
	// LogStartOffset and EndOffset are the partition's bounds: it holds
	// [LogStartOffset, EndOffset), the high watermark being EndOffset
	// (every applied record is committed).
	LogStartOffset, EndOffset int64
	// Changed is closed by the next append to the partition (or when the
	// partition is closed) after the read began: a long poll that found
	// no bytes waits on it, then reads again. Nothing is missed in between.
	Changed <-chan struct{}
}

// Lag is a consumer group's position in one partition against its log.
type Lag struct {
	// Start and End are the log's bounds: it holds [Start, End).
	Start, End int64
	// Records not yet committed.
	Records int64
	// Seconds is the age of the oldest record not yet committed (by its
	// timestamp), 0 when none or unreadable.
	Seconds float64
}

// DeadLetter is a record of a dead-letter topic as the state machine wrote
// it (fsm's logd-dlq-* headers, docs/guide.md "Work queues"), decoded the way
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

// OriginalKey is the idempotency key a redrive keeps for the record: the
// key it had when it was first dead-lettered (an earlier redrive's
// logd-redrive-idempotency-key header), else IdempotencyKey.
func (d DeadLetter) OriginalKey() string {
	if d.hasOriginalKey {
		return d.originalKey
	}
	return d.IdempotencyKey
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
		case DLQHeaderReason:
			d.Reason = v
		case DLQHeaderError:
			d.Error = v
		case DLQHeaderTopic:
			d.OriginTopic, topic = v, true
		case DLQHeaderPartition:
			if p, err := strconv.ParseInt(v, 10, 32); err == nil && p >= 0 {
				d.OriginPartition, part = int32(p), true
			}
		case DLQHeaderOffset:
			if o, err := strconv.ParseInt(v, 10, 64); err == nil && o >= 0 {
				d.OriginOffset = o
			}
		case DLQHeaderGroup:
			d.Group = v
		case DLQHeaderDeliveries:
			if n, err := strconv.Atoi(v); err == nil && n >= 0 {
				d.Deliveries = n
			}
		case DLQHeaderFirstDelivery:
			d.FirstDeliveryMs = ms(v)
		case DLQHeaderLastDelivery:
			d.LastDeliveryMs = ms(v)
		case DLQHeaderDeadLetteredAt:
			if t := ms(v); t != 0 {
				d.DeadLetteredMs = t
			}
		case RedriveHeaderCount:
			if c, err := strconv.Atoi(v); err == nil && c >= 0 {
				d.Redrives = c
			}
		case DLQHeaderHistory:
			d.History = h.Value
		case DLQHeaderIdempotencyKey:
			d.IdempotencyKey = v
		case RedriveHeaderKey:
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

// Headers the state machine adds to a dead-letter record (docs/guide.md,
// "Work queues"); the original key, value and headers are kept as they
// were.
const (
	DLQHeaderReason         = "logd-dlq-reason"
	DLQHeaderError          = "logd-dlq-error"
	DLQHeaderTopic          = "logd-dlq-origin-topic"
	DLQHeaderPartition      = "logd-dlq-origin-partition"
	DLQHeaderOffset         = "logd-dlq-origin-offset"
	DLQHeaderGroup          = "logd-dlq-group"
	DLQHeaderDeliveries     = "logd-dlq-deliveries"
	DLQHeaderFirstDelivery  = "logd-dlq-first-delivery"
	DLQHeaderLastDelivery   = "logd-dlq-last-delivery"
	DLQHeaderIdempotencyKey = "logd-dlq-idempotency-key"
	DLQHeaderDeadLetteredAt = "logd-dlq-time"
	// DLQHeaderHistory is the record's delivery attempts, as JSON (see
	// package replication/fsm, queue_history.go, for its layout).
	DLQHeaderHistory = "logd-dlq-history"
)

// Append appends whole record batches, as they are, to partitions of one
// topic in one Raft entry: the Kafka front end's produce.
type Append struct {
	Topic   string
	Batches []PartitionBatch
	// Verified says the front end checked each batch's CRC-32C
	// (batch.Verify or batch.Decode) after it read the batch off the
	// network, so the proposer need not compute it again. The state
	// machine still checks every batch before it writes any (a batch
	// damaged since is refused with ErrInvalidArgument, nothing written),
	// and a node that receives the append from another node checks it
	// whatever this says (docs/architecture.md, "Batch checks").
	Verified bool
}

// PartitionBatch is one Kafka RecordBatch v2 destined for one partition.
type PartitionBatch struct {
	Partition int32
	Batch     []byte
}
