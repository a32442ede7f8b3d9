package replication

import "errors"

// Errors returned by the replication layer. Errors that reach clients are
// mapped to API reasons by the server.
var (
	// ErrNotLeader means this node cannot propose: it is not the Raft leader.
	ErrNotLeader = errors.New("replication: not the leader")
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
	// ErrShutdown means the node is shutting down.
	ErrShutdown = errors.New("replication: shutting down")
	// ErrTimeout means a proposal's outcome is unknown: it may still commit.
	ErrTimeout = errors.New("replication: timed out waiting for commit; outcome unknown")
)
