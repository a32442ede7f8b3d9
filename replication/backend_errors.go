package replication

import (
	"github.com/logd-dev/logd/dedup"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/partition"
)

// Errors of the layers below that reach the front ends through Backend,
// named here so a front end maps them without importing storage. They are
// the same values (errors.Is matches either name).
var (
	// ErrOffsetOutOfRange means a read's offset is outside the partition's
	// [LogStartOffset, EndOffset]; returned as *OutOfRangeError.
	ErrOffsetOutOfRange = log.ErrOffsetOutOfRange
	// ErrCorrupt means stored bytes failed their checks (CRC, framing):
	// the damaged range is not served.
	ErrCorrupt = log.ErrCorrupt
	// ErrLogClosed means a partition's log closed under a read: its topic
	// was deleted meanwhile.
	ErrLogClosed = log.ErrClosed
	// ErrBatchTooLarge means a record batch exceeds the log's bound.
	ErrBatchTooLarge = log.ErrBatchTooLarge
	// ErrInvalidBatch means a record batch is not a well-formed Kafka
	// RecordBatch v2.
	ErrInvalidBatch = log.ErrInvalidBatch
	// ErrInvalidTopicName means a topic name breaks the naming rules.
	ErrInvalidTopicName = partition.ErrInvalidTopicName
	// ErrIdempotencyConflict means an idempotency key was reused, within
	// its topic's window, with a different payload.
	ErrIdempotencyConflict = dedup.ErrIdempotencyConflict
)

// OutOfRangeError is a read's offset outside [Start, End] with those
// bounds; it matches ErrOffsetOutOfRange.
type OutOfRangeError = log.OutOfRangeError
