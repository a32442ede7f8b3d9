package backend

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Errors of proposing and of reading a node's state. A write may fail with
// ErrNotLeader, ErrTimeout (outcome unknown) or ErrShutdown; every call
// may fail with ErrStopped.

// ErrNotLeader means this node cannot propose: it is not the Raft leader.
var ErrNotLeader = errors.New("replication: not the leader")

// ErrShutdown means the node is shutting down.
var ErrShutdown = errors.New("replication: shutting down")

// ErrTimeout means a proposal's outcome is unknown: it may still commit.
var ErrTimeout = errors.New("replication: timed out waiting for commit; outcome unknown")

// ErrBehind means this node has not applied yet what a read names (a
// consumer group's generation or position that the client learnt from
// the leader); returned as *BehindError, which names the leader.
var ErrBehind = errors.New("replication: this node has not applied what the request names yet")

// ErrPartitionElsewhere means a request named a partition of a data group
// that this node cannot serve it from: it holds no replica of the group,
// or the request is one not yet served for a topic placed over data
// groups (docs/architecture.md, "Data groups"). Another node, or a later
// build, serves it; the error names the group.
var ErrPartitionElsewhere = errors.New("replication: the partition is in a data group this node does not serve it from")

// ErrGroupElsewhere means a consumer group command reached a Raft group
// that does not hold the group's state: the group's home is another data
// group (docs/architecture.md, "Consumer groups"). The node that routed it
// had not applied the group's placement yet; it routes the command again,
// and a client that sees the error retries.
var ErrGroupElsewhere = errors.New("replication: the consumer group is in another data group")

// ErrKeyRequired means a write carried a record without a key (a null
// key; an empty key is a key) to a topic whose cleanup.policy includes
// compact, which keeps the last record of each key: compaction could
// neither keep nor remove it by its key. A tombstone, a key with a
// null value, is a record with a key. Nothing of the write is
// appended.
var ErrKeyRequired = errors.New("replication: a compacted topic takes only records with a key")

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

// Errors the state machine decides, the same on every replica (package
// replication/fsm returns these values). The front ends map them to API
// reasons and Kafka error codes; their texts keep the "replication:"
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
	// and snapshot catch-up did not complete it.
	ErrSnapshotAhead = errors.New("replication: snapshot is ahead of local partition data")
	// ErrNoSegmentSource means a snapshot needs segment bytes this node
	// cannot fetch: no peer is registered, or no fetcher is configured.
	ErrNoSegmentSource = errors.New("replication: no peer to fetch segments from")
	// ErrSegmentGone means a snapshot lists a segment in a form its peers
	// no longer hold: applied compactions or trims after the snapshot's
	// index replaced or deleted it. Retrying the same snapshot cannot
	// succeed; the leader takes a newer one.
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
	// ErrUnknownSCRAM means the user holds no SCRAM credential of that
	// mechanism.
	ErrUnknownSCRAM = errors.New("replication: unknown SCRAM credential")
	// ErrTooManySCRAM means a SCRAM credential was not set because the
	// cluster holds fsm.MaxSCRAMCredentials.
	ErrTooManySCRAM = errors.New("replication: too many SCRAM credentials")
	// ErrTooManyACLs means ACLs were not created because the cluster would
	// hold more than MaxACLs.
	ErrTooManyACLs = errors.New("replication: too many ACLs")
	// ErrUnknownRedrive means no redrive job with that id is kept (never
	// started, or dropped as one of the oldest ended jobs).
	ErrUnknownRedrive = errors.New("replication: unknown redrive job")
)

// Errors of membership changes. Each leaves the configuration as it was,
// except ErrNoQuorum and a catch-up that ends early, which leave a joining
// node a non-voter (a later Join resumes, RemoveNode takes it out).
var (
	// ErrUnknownNode means a membership call named a node that is not a
	// member.
	ErrUnknownNode = errors.New("replication: unknown node")
	// ErrMembershipChange means another membership change is in progress
	// on the leader; retry once it ends.
	ErrMembershipChange = errors.New("replication: another membership change is in progress")
	// ErrNodeHoldsReplicas means a removal named a node that data groups
	// still place replicas on: drain it first, or force the removal.
	ErrNodeHoldsReplicas = errors.New("replication: the node holds data group replicas")
	// ErrBackupDataGroups means a backup could not cut a data group that
	// holds partitions: no replica of it that holds every write it
	// acknowledged answered (no leader, or none reachable), it did not
	// adopt the partitions the meta group placed in it in time, or the
	// topics kept changing between the meta group's cut and the group's.
	// Nothing of the backup was written (docs/operations.md, "Backup and
	// restore").
	ErrBackupDataGroups = errors.New("replication: a data group could not be backed up")
	// ErrNodeUnreachable means a joining node does not answer on its API
	// address as the node it claims to be, or its Raft address refuses a
	// connection.
	ErrNodeUnreachable = errors.New("replication: node unreachable")
	// ErrNodeConflict means a join names a member's id with other
	// addresses, or an address that is another member's. Remove the
	// member first.
	ErrNodeConflict = errors.New("replication: conflicts with a member")
	// ErrNoQuorum means promoting a node would leave the cluster without a
	// reachable quorum: too few of its voters answer.
	ErrNoQuorum = errors.New("replication: no reachable quorum for the change")
)

// ErrFeatureLevel means a command was refused before it was proposed: some
// member of the cluster runs a build that would not understand it. Errors
// carrying data are *FeatureLevelError.
var ErrFeatureLevel = errors.New("replication: command not understood by every member yet")

// FeatureLevelError says which command the cluster's feature level does
// not cover yet.
type FeatureLevelError struct {
	Command string
	// Need is the level the command needs, Cluster the cluster's level.
	Need, Cluster FeatureLevel
}

func (e *FeatureLevelError) Error() string {
	return fmt.Sprintf("%v: %s needs feature level %d, the cluster is at %d (upgrade every node first)", ErrFeatureLevel, e.Command, e.Need, e.Cluster)
}

// Is makes errors.Is(err, ErrFeatureLevel) hold.
func (e *FeatureLevelError) Is(target error) bool { return target == ErrFeatureLevel }

// ShareConfigError is a change of a share group's settings refused
// (AlterShareGroupConfig): a group name that is not one, a setting
// unknown or named twice, or a value out of range. Nothing of the change
// is made. errors.Is(err, ErrInvalidConfig) holds.
type ShareConfigError struct {
	Group string
	// Name and Value are the setting refused ("" when the group's name
	// is); Reason says what it takes.
	Name, Value, Reason string
}

func (e *ShareConfigError) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("replication: invalid share group config: group %q: %s", e.Group, e.Reason)
	}
	return fmt.Sprintf("replication: invalid share group config: group %q: %s=%q: %s", e.Group, e.Name, e.Value, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidConfig) hold.
func (e *ShareConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// DefaultOverloadRetryAfter is the retry hint when nothing better is known
// (a refusal that names no group's drain rate).
const DefaultOverloadRetryAfter = time.Second

// OverloadedError says which group and bound refused an append.
type OverloadedError struct {
	Topic, Group string
	// Bound is "records", "bytes" or "age"; Backlog the group's backlog
	// before the append (for "age", the oldest unfinished record's age in
	// milliseconds), Adding what the append would add (0 for "age"), Limit
	// the bound.
	Bound                  string
	Backlog, Adding, Limit int64
	// DrainPerSec is the group's drain rate (finished records, or bytes
	// for the byte bound, per second over queue.DrainWindow), from the
	// replicated counters; RetryAfter the hint derived from it and the
	// excess over the bound (queue.RetryAfter): the same on every node.
	DrainPerSec float64
	RetryAfter  time.Duration
}

func (e *OverloadedError) Error() string {
	if e.Bound == "age" {
		return fmt.Sprintf("%v: queue group %s on %s has an unfinished record appended %v ago, past queue.max.backlog.age.ms=%d",
			ErrOverloaded, e.Group, e.Topic, time.Duration(e.Backlog)*time.Millisecond, e.Limit)
	}
	unit := e.Bound
	if e.Backlog == 1 {
		unit = strings.TrimSuffix(unit, "s") // "1 record", "1 byte"
	}
	return fmt.Sprintf("%v: queue group %s on %s has a backlog of %d %s; %d more would pass queue.max.backlog.%s=%d",
		ErrOverloaded, e.Group, e.Topic, e.Backlog, unit, e.Adding, e.Bound, e.Limit)
}

// Is makes errors.Is(err, ErrOverloaded) hold.
func (e *OverloadedError) Is(target error) bool { return target == ErrOverloaded }

// QuotaError is a create-topic the cluster's quota refused; errors.Is(err,
// ErrQuotaExceeded) holds.
type QuotaError struct {
	// Resource is "topics" or "partitions".
	Resource string
	// Principal is the creating principal when its own quota refused;
	// empty when the cluster's did.
	Principal string
	// Current is the cluster's (or the principal's) count before the
	// creation, Adding what it would add, Limit the quota.
	Current, Adding, Limit int64
}

func (e *QuotaError) Error() string {
	if e.Principal != "" {
		return fmt.Sprintf("%v: %s created %d %s, creating %d more would pass the quota of %d per principal", ErrQuotaExceeded, e.Principal, e.Current, e.Resource, e.Adding, e.Limit)
	}
	return fmt.Sprintf("%v: the cluster has %d %s, creating %d more would pass its quota of %d", ErrQuotaExceeded, e.Current, e.Resource, e.Adding, e.Limit)
}

// Is makes errors.Is(err, ErrQuotaExceeded) hold.
func (e *QuotaError) Is(target error) bool { return target == ErrQuotaExceeded }

// PartitionCountError is a growth refused for its count; errors.Is(err,
// ErrPartitionCount) and errors.Is(err, ErrInvalidArgument) hold.
type PartitionCountError struct {
	Topic string
	// Current is the topic's count, Requested the count asked for.
	Current, Requested int32
}

func (e *PartitionCountError) Error() string {
	if e.Requested < e.Current {
		return fmt.Sprintf("%v: %s has %d partitions and cannot shrink to %d (partitions can only be added)", ErrPartitionCount, e.Topic, e.Current, e.Requested)
	}
	return fmt.Sprintf("%v: %s has %d partitions, %d is above the limit of %d per topic", ErrPartitionCount, e.Topic, e.Current, e.Requested, MaxPartitions)
}

// Is makes errors.Is(err, ErrPartitionCount) and errors.Is(err,
// ErrInvalidArgument) hold.
func (e *PartitionCountError) Is(target error) bool {
	return target == ErrPartitionCount || target == ErrInvalidArgument
}

// Errors of the stored logs, as the backend reports them: it wraps the
// storage's error with these values, keeping its text, so a front end maps
// them without importing storage.
var (
	// ErrOffsetOutOfRange means a read's offset is outside the partition's
	// [log start, end]; errors carrying the bounds are *OutOfRangeError.
	ErrOffsetOutOfRange = errors.New("log: offset out of range")
	// ErrCorrupt means stored bytes failed their checks (CRC, framing):
	// the damaged range is not served.
	ErrCorrupt = errors.New("log: corrupt segment")
	// ErrLogClosed means a partition's log closed under a read: its topic
	// was deleted meanwhile.
	ErrLogClosed = errors.New("log: closed")
	// ErrBatchTooLarge means a record batch exceeds the log's bound.
	ErrBatchTooLarge = errors.New("log: record batch too large")
	// ErrInvalidBatch means a record batch is not a well-formed Kafka
	// RecordBatch v2.
	ErrInvalidBatch = errors.New("log: invalid record batch")
)

// OutOfRangeError is a read's offset outside [Start, End] with those
// bounds; errors.Is(err, ErrOffsetOutOfRange) holds.
type OutOfRangeError struct {
	Offset, Start, End int64
}

func (e *OutOfRangeError) Error() string {
	return fmt.Sprintf("log: offset %d out of range [%d, %d]", e.Offset, e.Start, e.End)
}

// Is makes errors.Is(err, ErrOffsetOutOfRange) hold.
func (e *OutOfRangeError) Is(target error) bool { return target == ErrOffsetOutOfRange }

// Errors of an idempotent producer's batch (a batch carrying a Kafka
// producer id), decided by the partition's producer state as Kafka's
// brokers decide them (docs/kafka.md, "Idempotent producers"). Only the
// batch of that partition is refused; the others of the append are
// written (PartialAppendError).
var (
	// ErrOutOfOrderSequence means the batch's first sequence does not
	// follow the producer's last on the partition (a gap, a batch older
	// than the last five, or a new epoch not starting at 0).
	ErrOutOfOrderSequence = errors.New("replication: out of order sequence number")
	// ErrInvalidProducerEpoch means the batch's producer epoch is below the
	// epoch the partition last saw from that producer id.
	ErrInvalidProducerEpoch = errors.New("replication: producer epoch older than the partition's")
)

// PartialAppendError is an append of which some batches were refused by
// their partition's producer state and the others written: Errs[i] is
// batch i's refusal (nil where it was written, or found to be a
// duplicate), Offsets[i] its base offset where it was.
type PartialAppendError struct {
	Offsets []int64
	Errs    []error
}

func (e *PartialAppendError) Error() string {
	n := 0
	var first error
	for _, err := range e.Errs {
		if err != nil {
			n++
			if first == nil {
				first = err
			}
		}
	}
	return fmt.Sprintf("%d of %d batches refused: %v", n, len(e.Errs), first)
}

// Unwrap returns the batches' refusals, so errors.Is finds each.
func (e *PartialAppendError) Unwrap() []error {
	out := make([]error, 0, len(e.Errs))
	for _, err := range e.Errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}
