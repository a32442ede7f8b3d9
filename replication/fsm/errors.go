package fsm

import "errors"

// Errors of the state machine. Package replication re-exports the ones
// that reach clients (the same values, so errors.Is holds on either name);
// the server maps them to API reasons. Their texts keep the "replication:"
// prefix clients have always seen.
var (
	// ErrUnknownTopic means the topic does not exist (or was deleted).
	ErrUnknownTopic = errors.New("replication: unknown topic")
	// ErrTopicExists means a topic of that name already exists.
	ErrTopicExists = errors.New("replication: topic already exists")
	// ErrUnknownPartition means the partition is outside the topic's range.
	ErrUnknownPartition = errors.New("replication: unknown partition")
	// ErrInvalidConfig means a topic setting is unknown or out of range.
	ErrInvalidConfig = errors.New("replication: invalid topic config")
	// ErrInvalidArgument means a command's arguments are invalid.
	ErrInvalidArgument = errors.New("replication: invalid argument")
	// ErrBadCommand means a Raft entry could not be decoded. Replicas would
	// diverge if they guessed, so the node stops.
	ErrBadCommand = errors.New("replication: malformed command")
	// ErrEntryDamaged means a Raft entry's bytes do not match the checksum
	// its proposer sealed it with: this node's copy of the Raft log was
	// damaged on disk. The node stops rather than apply something the other
	// replicas did not; wipe its data dir and rejoin it under a new id.
	ErrEntryDamaged = errors.New("replication: raft log entry damaged on this node")
	// ErrUnknownCommand means a Raft entry has a type or version this build
	// does not know; the node stops rather than diverge.
	ErrUnknownCommand = errors.New("replication: unknown command")
	// ErrStopped means the node has stopped after a fatal error (an I/O
	// error inside Apply) and no longer applies or acknowledges anything.
	ErrStopped = errors.New("replication: node stopped after a fatal error")
	// ErrRecordTooLarge means a batch exceeds the topic's max.message.bytes.
	ErrRecordTooLarge = errors.New("replication: record batch larger than the topic allows")
	// ErrDedupRace means an Append carried an idempotency key that another
	// entry committed first. Nothing was appended; the proposer looks the
	// keys up again (they are now duplicates or conflicts) and proposes the
	// rest.
	ErrDedupRace = errors.New("replication: idempotency key committed by a concurrent append")
	// ErrOverloaded means an append was refused by admission control;
	// nothing was written. Errors carrying data are *OverloadedError.
	ErrOverloaded = errors.New("replication: overloaded")
	// ErrDiverged means this replica's compaction output differs from the
	// leader's: the replicas no longer hold the same bytes, so the node
	// stops.
	ErrDiverged = errors.New("replication: compaction output differs from the leader's")
	// ErrSnapshotAhead means a snapshot names data this node does not hold
	// and catch-up (catchup.go) did not complete it.
	ErrSnapshotAhead = errors.New("replication: snapshot is ahead of local partition data")
	// ErrNoSegmentSource means a snapshot needs segment bytes this node
	// cannot fetch: no peer is registered, or no fetcher is configured.
	ErrNoSegmentSource = errors.New("replication: no peer to fetch segments from")
	// ErrSegmentGone means a snapshot lists a segment in a form its peers
	// no longer hold: applied compactions or trims after the snapshot's
	// index replaced or deleted it. Retrying the same snapshot cannot
	// succeed; the leader takes a newer one (catchup.go).
	ErrSegmentGone = errors.New("replication: segment changed since the snapshot listed it")
	// ErrQuotaExceeded means a topic was not created because the cluster
	// would pass its quota of topics or partitions. Errors carrying data
	// are *QuotaError.
	ErrQuotaExceeded = errors.New("replication: cluster quota exceeded")
	// ErrPartitionCount means a topic was not grown to the partition count
	// asked for: partitions are never removed, and a topic holds at most
	// MaxPartitions. Errors carrying data are *PartitionCountError.
	ErrPartitionCount = errors.New("replication: invalid partition count")
	// ErrTokenExists means a token with that id is already stored.
	ErrTokenExists = errors.New("replication: token already exists")
	// ErrUnknownToken means no token with that id is stored (never
	// created, or revoked).
	ErrUnknownToken = errors.New("replication: unknown token")
	// ErrTooManyTokens means a token was not created because the cluster
	// holds MaxTokens live tokens already.
	ErrTooManyTokens = errors.New("replication: too many tokens")
	// ErrTooManyACLs means ACLs were not created because the cluster would
	// hold more than MaxACLs.
	ErrTooManyACLs = errors.New("replication: too many ACLs")
	// ErrUnknownRedrive means no redrive job with that id is kept (never
	// started, or dropped as one of the oldest ended jobs).
	ErrUnknownRedrive = errors.New("replication: unknown redrive job")
)
