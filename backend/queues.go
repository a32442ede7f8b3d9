package backend

import (
	"time"

	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/queue"
)

// QueueClaimResult is the outcome of an applied claim.
type QueueClaimResult struct {
	Records []ClaimedRecord
	// AtCap lists partitions whose in-flight cap kept waiting records back.
	AtCap []int32
	// DeadLettered counts records this command moved to the dead-letter
	// topic.
	DeadLettered int
	// Paused: the group is paused and delivered nothing.
	Paused bool
}

// ClaimedRecord is one delivered record with its content. Key, Value and
// header values belong to the result.
type ClaimedRecord struct {
	queue.Delivery
	Record batch.Record
}

// QueueTokensResult is the outcome of an applied ack, nack or extend: one
// result per token, in command order.
type QueueTokensResult struct {
	Results      []queue.TokenResult
	DeadLettered int
}

// QueueGroupInfo describes a queue group for describe.
type QueueGroupInfo struct {
	Topic      string
	Group      string
	Config     queue.Config
	CreatedAt  int64
	Partitions []QueuePartitionInfo
	// Paused: the group delivers nothing.
	Paused bool
	// Backlog is what admission control bounds (Bytes exact when
	// ExactBytes, else estimated); DrainPerSec the records finished per
	// second over queue.DrainWindow; OldestAppend the append time (Unix
	// ns) of the oldest unfinished record, 0 when none or not known;
	// MaxBacklogAgeMs the topic's queue.max.backlog.age.ms (-1: none).
	Backlog         queue.Backlog
	ExactBytes      bool
	DrainPerSec     float64
	OldestAppend    int64
	MaxBacklogAgeMs int64
}

// QueuePartitionInfo is one partition's queue state with the timestamp of
// its oldest ready record (0 when none or unreadable).
type QueuePartitionInfo struct {
	queue.PartitionStats
	OldestReadyTimestamp int64 // Unix ns
}

// QueueReleaseResult is the outcome of an applied release of a worker's
// leases: how many it ended, and how many of those records went to the
// dead-letter topic (their last allowed delivery).
type QueueReleaseResult struct {
	Released, DeadLettered int
}

// QueuePauseResult says whether the command changed the group.
type QueuePauseResult struct {
	Paused, Changed bool
}

// MaxQueueClaim bounds the records of one claim.
const MaxQueueClaim = 10_000

// MaxQueueTokens bounds the tokens of one ack, nack or extend.
const MaxQueueTokens = 10_000

// QueueCreate creates a queue group on a topic (and its dead-letter topic
// when missing).
type QueueCreate struct {
	Topic  string
	Group  string
	Config queue.Config
	// FromEnd starts the group at each partition's end offset (only new
	// records); otherwise it works every record from offset 0.
	FromEnd bool
}

// QueueClaim claims up to Max records (and MaxBytes of them) under a lease
// of Lease, for the worker named Worker (at most queue.MaxWorkerLen bytes).
type QueueClaim struct {
	Topic    string
	Group    string
	Max      int32
	MaxBytes int32
	Lease    time.Duration
	Worker   string
}

// QueueAck acknowledges deliveries.
type QueueAck struct {
	Topic  string
	Group  string
	Tokens []queue.Token
}

// QueueNack fails deliveries, transiently (redelivered after backoff) or
// permanently (dead-lettered at once).
type QueueNack struct {
	Topic string
	Group string
	Nacks []queue.Nack
}

// QueueExtend extends the leases of deliveries to now+Lease.
type QueueExtend struct {
	Topic  string
	Group  string
	Lease  time.Duration
	Tokens []queue.Token
}
