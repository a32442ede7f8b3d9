package replication

import (
	"errors"
	"fmt"

	"github.com/logd-dev/logd/replication/fsm"
)

// Errors of the Raft side.
var (
	// ErrNotLeader means this node cannot propose: it is not the Raft leader.
	ErrNotLeader = errors.New("replication: not the leader")
	// ErrShutdown means the node is shutting down.
	ErrShutdown = errors.New("replication: shutting down")
	// ErrTimeout means a proposal's outcome is unknown: it may still commit.
	ErrTimeout = errors.New("replication: timed out waiting for commit; outcome unknown")
	// ErrBehind means this node has not applied yet what a read names (a
	// consumer group's generation or position that the client learnt from
	// the leader); returned as *BehindError, which names the leader.
	ErrBehind = errors.New("replication: this node has not applied what the request names yet")
	// ErrKeyRequired means a write carried a record without a key (a null
	// key; an empty key is a key) to a topic whose cleanup.policy includes
	// compact, which keeps the last record of each key: compaction could
	// neither keep nor remove it by its key. A tombstone, a key with a
	// null value, is a record with a key. Nothing of the write is
	// appended.
	ErrKeyRequired = errors.New("replication: a compacted topic takes only records with a key")
)

// BehindError is ErrBehind with what the node lacks and where the leader
// is: the leader has applied everything it acknowledged, so the client
// retries there.
type BehindError struct {
	// What the request named that this node has not applied.
	What string
	// LeaderAddress is the leader's client API address; "" if unknown.
	LeaderAddress string
}

func (e *BehindError) Error() string {
	if e.LeaderAddress == "" {
		return fmt.Sprintf("%v: %s", ErrBehind, e.What)
	}
	return fmt.Sprintf("%v: %s; the leader at %s has it", ErrBehind, e.What, e.LeaderAddress)
}

// Unwrap makes errors.Is(err, ErrBehind) hold.
func (e *BehindError) Unwrap() error { return ErrBehind }

// Errors of the state machine (package fsm), the same values under the
// names the front ends use, so errors.Is holds on either. Errors that reach
// clients are mapped to API reasons by the server.
var (
	// ErrUnknownTopic means the topic does not exist (or was deleted).
	ErrUnknownTopic = fsm.ErrUnknownTopic
	// ErrTopicExists means a topic of that name already exists.
	ErrTopicExists = fsm.ErrTopicExists
	// ErrUnknownPartition means the partition is outside the topic's range.
	ErrUnknownPartition = fsm.ErrUnknownPartition
	// ErrInvalidConfig means a topic setting is unknown or out of range.
	ErrInvalidConfig = fsm.ErrInvalidConfig
	// ErrInvalidArgument means a command's arguments are invalid.
	ErrInvalidArgument = fsm.ErrInvalidArgument
	// ErrBadCommand means a Raft entry could not be decoded; the node stops.
	ErrBadCommand = fsm.ErrBadCommand
	// ErrEntryDamaged means this node's copy of a Raft entry was damaged
	// on disk; the node stops.
	ErrEntryDamaged = fsm.ErrEntryDamaged
	// ErrUnknownCommand means a Raft entry has a type or version this build
	// does not know; the node stops rather than diverge.
	ErrUnknownCommand = fsm.ErrUnknownCommand
	// ErrStopped means the node has stopped after a fatal error (an I/O
	// error inside Apply) and no longer applies or acknowledges anything.
	ErrStopped = fsm.ErrStopped
	// ErrRecordTooLarge means a batch exceeds the topic's max.message.bytes.
	ErrRecordTooLarge = fsm.ErrRecordTooLarge
	// ErrDedupRace means an Append carried an idempotency key another entry
	// committed first; nothing was appended.
	ErrDedupRace = fsm.ErrDedupRace
	// ErrOverloaded means an append was refused by admission control
	// (*OverloadedError); nothing was written.
	ErrOverloaded = fsm.ErrOverloaded
	// ErrDiverged means this replica's compaction output differs from the
	// leader's; the node stops.
	ErrDiverged = fsm.ErrDiverged
	// ErrSnapshotAhead means a snapshot names data this node does not hold
	// and catch-up did not complete it.
	ErrSnapshotAhead = fsm.ErrSnapshotAhead
	// ErrNoSegmentSource means a snapshot needs segment bytes this node
	// cannot fetch: no peer is registered, or no source is configured.
	ErrNoSegmentSource = fsm.ErrNoSegmentSource
	// ErrSegmentGone means a snapshot lists a segment in a form its peers
	// no longer hold (compacted or trimmed since).
	ErrSegmentGone = fsm.ErrSegmentGone
	// ErrQuotaExceeded means a topic was not created because the cluster
	// would pass its quota of topics or partitions (*QuotaError).
	ErrQuotaExceeded = fsm.ErrQuotaExceeded
	// ErrPartitionCount means a topic was not grown to the count asked
	// for: counts never shrink, and are at most fsm.MaxPartitions
	// (*PartitionCountError, which errors.Is ErrInvalidArgument too).
	ErrPartitionCount = fsm.ErrPartitionCount
	// ErrTokenExists means a token with that id is already stored.
	ErrTokenExists = fsm.ErrTokenExists
	// ErrUnknownToken means no token with that id is stored.
	ErrUnknownToken = fsm.ErrUnknownToken
	// ErrUnknownRedrive means no redrive job with that id is kept.
	ErrUnknownRedrive = fsm.ErrUnknownRedrive
	// ErrTooManyTokens means the cluster holds MaxTokens live tokens.
	ErrTooManyTokens = fsm.ErrTooManyTokens
	// ErrTooManyACLs means the cluster would hold more than MaxACLs.
	ErrTooManyACLs = fsm.ErrTooManyACLs
)
