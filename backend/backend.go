package backend

import (
	"context"
	"io"
	"time"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/queue"
)

// API is everything the Connect API's handlers (package server) need from
// the node: they decode a request, call the backend and map its errors;
// they hold no storage and see nothing of Raft. Package replication
// implements it. The Kafka front end needs a different set (Kafka); these
// contracts hold for both.
//
// Contracts, for every method unless it says otherwise:
//   - Any goroutine may call it; a ctx bounds only methods that take one.
//   - Returned values and slices are copies the caller owns; the backend
//     keeps no reference to slices passed in once the call returns.
//   - Offsets follow Kafka: a partition holds the half-open range
//     [log start, end); a committed offset is the next offset to read.
//   - Reads answer from the state this node has applied, which is all
//     committed. Writes answer after their Raft entry is committed and
//     applied; on a follower they fail with ErrNotLeader (the server
//     forwards writes to the leader before that).
//   - Errors match the sentinels and types below with errors.Is/As, and
//     errors.go maps each to its code. Every method may fail with
//     ErrStopped (the state machine stopped after an I/O error), and every
//     write with ErrNotLeader, ErrTimeout (outcome unknown) and ErrShutdown.
//
// The caller's principal travels in the context: a front end that
// authenticates sets it with WithPrincipal before calling the
// backend, and PrincipalFrom reads it (Anonymous when unset),
// for audit; the server authorizes calls itself from the
// security state below.
type API interface {
	ClusterAPI
	TopicAPI
	RecordAPI
	GroupAPI
	QueueAPI
	RedriveAPI
	StatsAPI
	SecurityAPI
}

// ClusterAPI is the node and its cluster.
type ClusterAPI interface {
	// NodeID is this node's id; APIAddress its client API address as
	// registered ("" if none).
	NodeID() string
	APIAddress() string
	// Ready reports whether the node may answer from its state: it has
	// applied everything committed before it started, and, when it leads,
	// a barrier of its current term (so a new leader never answers
	// without what its predecessor acknowledged). Failed returns the error
	// that stopped the state machine.
	Ready() bool
	Failed() error
	// IsLeader reports whether this node is the Raft leader now.
	IsLeader() bool
	// AppliedIndex is the Raft index of the last entry this node applied.
	// AwaitApplied waits, at most wait and while ctx lasts, until this
	// node has applied index, then fails with *BehindError. ReadIndex, on
	// the leader only (ErrNotLeader elsewhere), returns an index that
	// covers every write acknowledged before the call: a read that waits
	// to apply it is linearizable (docs/architecture.md, "Read
	// guarantees").
	AppliedIndex() uint64
	AwaitApplied(ctx context.Context, index uint64, wait time.Duration) error
	ReadIndex() (uint64, error)
	// LeaderAPIAddress returns the leader's registered client API address
	// and id; "" when no leader is known (or it has not registered).
	LeaderAPIAddress() (addr, id string)
	// LeaderCallAddress is LeaderAPIAddress for calls between nodes
	// (forwarding): the leader's registered peer address, or its API
	// address when it registered none.
	LeaderCallAddress() (addr, id string)
	// MemberAPIAddresses lists the registered nodes' client API addresses.
	MemberAPIAddresses() []string
	// NodeAPIAddress returns a node's registered client API address.
	NodeAPIAddress(id string) (string, bool)
	// Status is this node's view of the Raft group.
	Status() Status
	// Backup streams a backup of the state at one Raft index into the
	// writer start returns, on the leader only (ErrNotLeader elsewhere);
	// start is called once, with the backup's description, before any
	// byte is written (package replication/catchup).
	Backup(ctx context.Context, start func(BackupInfo) (io.Writer, error)) (BackupInfo, error)
	// Now is the node's clock, the one that stamps its commands: a
	// handler that answers by time (queue describe) reads it, so it
	// answers by the same time the node decides by.
	Now() time.Time
	// Join checks a node through probe, adds it as a non-voter and
	// promotes it once probe shows it caught up (ErrNodeUnreachable,
	// ErrNodeConflict, ErrNoQuorum, ErrMembershipChange); RemoveNode
	// removes one (ErrUnknownNode, ErrMembershipChange);
	// TransferLeadership hands leadership to a voter ("" for any).
	Join(ctx context.Context, req JoinRequest, probe NodeProbe) error
	// ClusterSecret is the secret the node's Raft port proves (nil for
	// none), and whether it requires it of every peer yet
	// (docs/security.md, "Peers"); a front end hands it only to a caller
	// allowed to join.
	ClusterSecret() (secret []byte, required bool)
	RemoveNode(ctx context.Context, id string) error
	// DrainNode starts (or with undo ends) the drain of a node's data
	// group replicas and returns the nodes being drained
	// (ErrInvalidArgument for a node that holds none, *FeatureLevelError).
	DrainNode(ctx context.Context, id string, undo bool) ([]string, error)
	// ListMoves lists the data group replica moves in progress that the
	// table this node applied marks, by group id, each with the group's
	// voters as a replica reports them: the answer for one group is
	// bounded in time (MoveState.VotersError then says why none came),
	// so the list comes back while ctx lasts. Empty without moves.
	ListMoves(ctx context.Context) ([]MoveState, error)
	// PlanBalance computes, from the table this node applied, the
	// replica moves and leadership hand-overs the meta leader's balancing
	// would make until the data groups are balanced; it changes nothing.
	PlanBalance() (BalancePlan, error)
	TransferLeadership(ctx context.Context, id string) error
}

// TopicAPI creates, changes and describes topics. Errors:
// ErrInvalidTopicName, ErrUnknownTopic, ErrTopicExists, ErrInvalidConfig,
// ErrInvalidArgument.
type TopicAPI interface {
	CreateTopic(ctx context.Context, c CreateTopic) (TopicInfo, error)
	AlterTopic(ctx context.Context, c AlterTopic) (TopicInfo, error)
	// CreatePartitions grows a topic's partition count; never shrinks it
	// (*PartitionCountError), within the quota
	// (*QuotaError). ValidateCreatePartitions checks the same
	// without proposing.
	CreatePartitions(ctx context.Context, c CreatePartitions) (TopicInfo, error)
	ValidateCreatePartitions(c CreatePartitions) error
	DeleteTopic(ctx context.Context, name string) error
	Topic(name string) (TopicInfo, error)
	// Topics and TopicStates are sorted by name.
	Topics() []TopicInfo
	DescribeTopic(name string) (TopicState, error)
	TopicStates() []TopicState
	// TopicQuota is the quota this node writes into the creations it
	// proposes (CreateTopic fails with *QuotaError past it),
	// and the cluster's counts of topics and partitions.
	TopicQuota() (q TopicQuota, topics, partitions int64)
}

// RecordAPI writes and reads records.
type RecordAPI interface {
	// Produce appends a call's records whole or not at all, routing and
	// deduplicating them (Backend.Produce lists its errors).
	Produce(ctx context.Context, req ProduceRequest) (ProduceResult, error)
	// NoteWritten raises this node's read floors of partitions of a
	// placed topic (its incarnation, the topic's CreateIndex) to the ends
	// a write this node forwarded reached there (partition → the offset
	// after its records): reads through this node that start after it
	// see the write.
	NoteWritten(topic string, incarnation uint64, ends map[int32]int64)
	// NoteGroupsApplied raises this node's floors of data groups (group
	// → the index its leader had applied when it acknowledged a write
	// this node forwarded, GroupsWritten): reads of those groups through
	// this node that start after it see the write.
	NoteGroupsApplied(groups map[uint64]uint64)
	// Read returns whole stored RecordBatch v2 batches from offset, up to
	// maxBytes but at least one batch, as stored (no re-encoding), copied
	// out: the caller owns them and releases nothing. Its Changed channel,
	// taken before the read, is closed by the next append: a long poll
	// that read nothing waits on it (or on its deadline) and reads again.
	// Errors: ErrUnknownTopic, ErrUnknownPartition, *OutOfRangeError
	// (with the bounds), ErrCorrupt, ErrLogClosed (topic deleted).
	Read(topic string, partition int32, offset int64, maxBytes int) (ReadResult, error)
	// ReadRecords is Read that reads no further than the batches holding
	// maxRecords records from offset (0: no bound), so a fetch that wants
	// few records of large ones does not read max bytes of them; it may
	// answer fewer records than maxRecords while the partition holds more
	// (at least one batch).
	ReadRecords(topic string, partition int32, offset int64, maxBytes, maxRecords int) (ReadResult, error)
	// ReadLeader is Read as the leader of the partition's data group
	// answers it, once it confirmed its leadership: a linearizable read of
	// a partition placed over data groups, whose replica here may lag its
	// group (a consistent read, docs/architecture.md, "Read guarantees").
	// For a partition of the meta group it is Read: the caller's read
	// index orders that one.
	ReadLeader(ctx context.Context, topic string, partition int32, offset int64, maxBytes int) (ReadResult, error)
	// OffsetsLeader is Offsets as ReadLeader answers: a partition's bounds
	// from its data group's leader, once it confirmed its leadership.
	OffsetsLeader(ctx context.Context, topic string, partition int32) (Offsets, error)
	// Offsets returns a partition's bounds; OffsetForTime the first offset
	// whose batch's max timestamp is at or after tsMillis (the end when
	// none is).
	Offsets(topic string, partition int32) (Offsets, error)
	OffsetForTime(topic string, partition int32, tsMillis int64) (int64, error)
}

// GroupAPI is consumer groups (package group's errors: fencing with
// ErrStaleGeneration, ErrNotAssigned, ErrUnknownMember; and
// ErrConsumerGroupNotFound, ErrConsumerGroupNotEmpty, ErrOffsetAboveEnd,
// ErrNoResetPolicy, ErrUnknownGroupTopic, ErrInvalidGroupRequest; and
// ErrBehind).
type GroupAPI interface {
	JoinGroup(ctx context.Context, c GroupJoin) (group.Assignment, error)
	GroupHeartbeat(ctx context.Context, c GroupHeartbeat) (group.Assignment, error)
	LeaveGroup(ctx context.Context, c GroupLeave) error
	CommitGroupOffsets(ctx context.Context, c GroupCommit) error
	ResetGroupOffsets(ctx context.Context, c GroupResetOffsets) error
	// AutoResetGroupOffset moves a member's committed offset that fell
	// below the log start by its reset policy; it returns the new one.
	AutoResetGroupOffset(ctx context.Context, c GroupAutoReset) (int64, error)
	DeleteGroup(ctx context.Context, name string) error
	// ConsumerGroup and ConsumerGroups (sorted by name) return copies,
	// read from each group's home (docs/architecture.md, "Consumer
	// groups"): this node's replica of it, else a replica of it.
	ConsumerGroup(name string) (*group.ConsumerGroup, error)
	// ConsumerGroupLeader is ConsumerGroup as the leader of the group's
	// home answers it, once it confirmed its leadership: with the
	// caller's wait for the meta leader's read index, a consistent read
	// (docs/architecture.md, "Read guarantees").
	ConsumerGroupLeader(ctx context.Context, name string) (*group.ConsumerGroup, error)
	// ExternalGroup returns a group as its Kafka group coordinator holds
	// it (its members live in that memory only): for a group of the meta
	// group, none on a follower; for one in a data group, as the home's
	// leader answers (Backend.ExternalGroup).
	ExternalGroup(name string) ExternalGroup
	ConsumerGroups() []*group.ConsumerGroup
	// LocalConsumerGroups returns copies of the groups whose state this
	// node holds (the meta group's, and those of the data groups it
	// holds a serving replica of), sorted by name, asking no other node.
	LocalConsumerGroups() []*group.ConsumerGroup
	// GroupHome is the Raft group that holds a group's state as this
	// node knows it: 0 for the meta group (or a group it does not know),
	// else a data group.
	GroupHome(name string) uint64
	// RoutesGroups reports whether this node routes group commands to
	// their homes itself (every member's build keeps groups in data
	// groups, and there are data groups): the server then serves group
	// writes on the node that receives them rather than forwarding them
	// to the leader.
	RoutesGroups() bool
	// AwaitGroupFetch refuses a read by a member that does not own the
	// partition at its generation (the fencing errors). A node that has
	// not applied the member's generation or offset yet (a follower right
	// after the member's forwarded join) first waits up to wait for it,
	// then fails with *BehindError (ErrBehind), which names
	// the leader.
	AwaitGroupFetch(ctx context.Context, c GroupFetchCheck, wait time.Duration) error
	// GroupLag is a group's lag in a partition at a committed offset.
	GroupLag(topic string, partition int32, committed int64, now time.Time) (Lag, error)
}

// RedriveAPI is redrive jobs, run by the leader (package
// replication/redrive). Errors: ErrUnknownTopic, ErrInvalidArgument,
// ErrUnknownRedrive, *FeatureLevelError.
type RedriveAPI interface {
	StartRedrive(ctx context.Context, s RedriveSpec) (RedriveJob, error)
	StopRedrive(ctx context.Context, id string) (RedriveJob, error)
	RedriveJob(id string) (RedriveJob, error)
	RedriveJobs() []RedriveJob
	// RedrivePosition is a job's position, per dead-letter partition.
	RedrivePosition(j RedriveJob) []int64
}

// QueueAPI is queue groups (package queue's errors: ErrGroupNotFound,
// ErrGroupExists, ErrInvalidConfig, ErrInvalidRequest, ErrBadToken,
// ErrStaleToken; and *OverloadedError from Produce when a queue group's
// backlog is full).
type QueueAPI interface {
	CreateQueueGroup(ctx context.Context, c QueueCreate) (queue.Config, error)
	AlterQueueGroup(ctx context.Context, topic, name string, change func(*queue.Config)) (queue.Config, error)
	PauseQueueGroup(ctx context.Context, topic, name string, paused bool) (QueuePauseResult, error)
	// QueueClaimWait claims records, long-polling up to wait while none is
	// claimable. admit, if not nil, is called once records are claimable,
	// before any is claimed (and leased); its error ends the call with
	// nothing claimed. It may be called more than once (a claim that
	// found nothing after all waits again). The server charges the
	// answer's memory there (server/answer_budget.go), so a long poll
	// holds none while it waits.
	QueueClaimWait(ctx context.Context, c QueueClaim, wait time.Duration, admit func(context.Context) error) (QueueClaimResult, error)
	QueueAck(ctx context.Context, c QueueAck) (QueueTokensResult, error)
	QueueNack(ctx context.Context, c QueueNack) (QueueTokensResult, error)
	QueueExtend(ctx context.Context, c QueueExtend) (QueueTokensResult, error)
	// DescribeQueueGroup describes a group at now (Unix ns); QueueGroups
	// lists a topic's groups, sorted.
	DescribeQueueGroup(topic, name string, now int64) (QueueGroupInfo, error)
	QueueGroups(topic string) []string
	// QueueInFlight lists a group's records under a live lease at now, at
	// most limit of them, and whether the list was cut.
	QueueInFlight(topic, name string, now int64, limit int) ([]queue.InFlightRecord, bool, error)
}

// SecurityAPI is the cluster's tokens and ACLs, replicated state
// (docs/security.md). Token and ACLs are read on every call: they take no
// lock and, for ACLs, return an immutable set the caller may keep.
// CreateToken stores a verifier (never the secret) with the principal
// that created it; RevokeToken removes one and returns what it was
// (ErrUnknownToken). CreateACLs adds ACLs, keeping those already present
// once, and returns how many were new; DeleteACLs removes those f
// matches and returns them (with dryRun, only returns them). Errors:
// ErrTokenExists, ErrTooManyTokens, ErrTooManyACLs, and auth's
// ErrInvalidToken and ErrInvalidACL for values that do not validate.
type SecurityAPI interface {
	CreateToken(ctx context.Context, v auth.Verifier, createdBy string) error
	RevokeToken(ctx context.Context, id string) (TokenInfo, error)
	// Tokens lists the stored tokens' public fields, sorted by id.
	Tokens() []TokenInfo
	Token(id string) (auth.Verifier, bool)
	CreateACLs(ctx context.Context, acls []auth.ACL) (created int, err error)
	DeleteACLs(ctx context.Context, f auth.Filter, dryRun bool) ([]auth.ACL, error)
	ACLs() *auth.Set
	// SCRAM credentials (the Kafka listener's SASL): SetSCRAMCredential
	// sets one (replacing the user's of that mechanism; ErrTooManySCRAM),
	// DeleteSCRAMCredential deletes one (ErrUnknownSCRAM),
	// SCRAMCredentials lists them without keys, sorted by user then
	// mechanism, and SCRAMCredential reads one without a lock.
	SetSCRAMCredential(ctx context.Context, c auth.SCRAMCredential, setBy string) (SCRAMInfo, error)
	DeleteSCRAMCredential(ctx context.Context, user string, m auth.SCRAMMechanism) (SCRAMInfo, error)
	SCRAMCredentials() []SCRAMInfo
	SCRAMCredential(user string, m auth.SCRAMMechanism) (auth.SCRAMCredential, bool)
}

// StatsAPI feeds /metrics.
type StatsAPI interface {
	CleanerCounters() CleanerCounters
	CleanerStats() CleanerStats
	// CatchUpStats counts the segment bytes this node copied from peers
	// to build or catch up its replicas, and its waits for their budget.
	CatchUpStats() CatchUpStats
	// RaftConnStats counts the connections of the node's Raft port
	// zero for a node without one.
	RaftConnStats() RaftConnStats
	// RaftMetrics are Raft's timings, leader changes and, on the leader,
	// what each follower last answered.
	RaftMetrics() RaftMetrics
	// DiskUsage is the file system of the node's data directory.
	DiskUsage() (DiskUsage, error)
}

// Kafka is what the Kafka front end (package kafka) needs from the node;
// the contracts written on API hold for these methods too (copies the caller
// owns, Kafka's offsets, typed errors, writes answered after commit).
// Backend implements it.
type Kafka interface {
	// NodeID is this node's id and APIAddress its registered client API
	// address; Ready and IsLeader are as in ClusterAPI.
	NodeID() string
	APIAddress() string
	Ready() bool
	IsLeader() bool
	// LeadsPartition reports whether this node leads a partition: leads
	// the data group that holds it, with a barrier of its term applied,
	// or, for a partition of the meta group (or an unknown one), leads
	// the meta group (docs/architecture.md, "Data groups").
	LeadsPartition(topic string, partition int32) bool
	// Status is this node's view of the Raft group: its members (the
	// brokers Metadata lists, the voters being every partition's
	// replicas) and its leader.
	Status() Status
	// RaftMetrics holds, on the leader, when each follower last answered
	// it: the voters that answered lately
	// are a partition's in-sync replicas.
	RaftMetrics() RaftMetrics
	// NodeKafkaAddress returns the Kafka address a node registered (its
	// --kafka-advertise); false when it registered none (no Kafka
	// listener, or a build before the field).
	NodeKafkaAddress(id string) (string, bool)
	// NodeAPIAddress returns a node's registered client API address, from
	// which the Kafka address of a node that registered none is derived
	// (Options.PeerAddress).
	NodeAPIAddress(id string) (string, bool)

	// Topics.
	CreateTopic(ctx context.Context, c CreateTopic) (TopicInfo, error)
	AlterTopic(ctx context.Context, c AlterTopic) (TopicInfo, error)
	DeleteTopic(ctx context.Context, name string) error
	Topic(name string) (TopicInfo, error)
	Topics() []TopicInfo
	// ValidateCreateTopic and ValidateAlterTopic check a change as the
	// write would, writing nothing (a request to validate only);
	// TopicConfigDefaults lists every topic setting with its default.
	ValidateCreateTopic(c CreateTopic) error
	ValidateAlterTopic(c AlterTopic) error
	TopicConfigDefaults() map[string]string
	// CreatePartitions grows a topic's partition count, never shrinking
	// it; ValidateCreatePartitions checks the same, writing nothing.
	CreatePartitions(ctx context.Context, c CreatePartitions) (TopicInfo, error)
	ValidateCreatePartitions(c CreatePartitions) error

	// Append appends record batches as they are, one per partition of one
	// topic, in one Raft entry, and returns each batch's base offset once
	// committed and applied.
	Append(ctx context.Context, a Append) ([]int64, error)
	// CheckCompression says whether batches of a codec may be appended
	// now: snappy, lz4 and zstd only once every member's build reads them
	// (*FeatureLevelError before).
	CheckCompression(c batch.Compression) error
	// InitProducerID hands out a new Kafka producer id, epoch 0, from the
	// cluster's allocator, which never hands out an id twice; on a node
	// that does not lead, ErrNotLeader. CheckIdempotence says whether the
	// cluster serves idempotent producers yet (*FeatureLevelError
	// before): producer ids, and batches carrying one, which Append then
	// judges by their partition's producer state (a refused batch is
	// reported in a *PartialAppendError, the others written).
	InitProducerID(ctx context.Context) (id int64, epoch int16, err error)
	CheckIdempotence() error
	// Read, Offsets, OffsetsLeader and OffsetForTime are as in
	// RecordAPI. An OffsetCommit is checked against OffsetsLeader: a
	// data group's replica on the coordinator may trail the offsets a
	// consumer read from the partition's leader.
	Read(topic string, partition int32, offset int64, maxBytes int) (ReadResult, error)
	Offsets(topic string, partition int32) (Offsets, error)
	OffsetsLeader(ctx context.Context, topic string, partition int32) (Offsets, error)
	OffsetForTime(topic string, partition int32, tsMillis int64) (int64, error)

	// Consumer groups.
	KafkaGroups

	// Queue groups, as in QueueAPI: a Kafka share group is the queue
	// groups of its name on the topics it subscribes to (docs/kafka.md,
	// "Share groups").
	CreateQueueGroup(ctx context.Context, c QueueCreate) (queue.Config, error)
	AlterQueueGroup(ctx context.Context, topic, name string, change func(*queue.Config)) (queue.Config, error)
	QueueClaimWait(ctx context.Context, c QueueClaim, wait time.Duration, admit func(context.Context) error) (QueueClaimResult, error)
	QueueAck(ctx context.Context, c QueueAck) (QueueTokensResult, error)
	QueueNack(ctx context.Context, c QueueNack) (QueueTokensResult, error)
	QueueExtend(ctx context.Context, c QueueExtend) (QueueTokensResult, error)
	QueueGroups(topic string) []string
	DescribeQueueGroup(topic, name string, now int64) (QueueGroupInfo, error)
	// ReleaseQueueWorker ends the live leases of a queue group whose
	// claims named worker, offering their records again at once
	// (*FeatureLevelError before every member's build applies it).
	ReleaseQueueWorker(ctx context.Context, topic, name, worker, why string) (QueueReleaseResult, error)
	// SetQueueStarts moves the start offsets of partitions of a queue
	// group (queue.Group.SetStarts: queue.ErrGroupBusy while a record is
	// leased, queue.ErrInvalidRequest for a start outside [0, end]), and
	// DeleteQueueGroup deletes a queue group (queue.ErrGroupBusy too);
	// both answer *FeatureLevelError before every member's build applies
	// them, which CheckQueueStarts tells beforehand.
	SetQueueStarts(ctx context.Context, topic, name string, starts []queue.PartitionStart) error
	DeleteQueueGroup(ctx context.Context, topic, name string) error
	CheckQueueStarts() error
	// ShareGroupConfig returns a share group's settings as this node
	// applied them (any node answers; nothing set: the zero value).
	// AlterShareGroupConfig changes them and returns them as changed,
	// on the meta group's leader (ErrNotLeader elsewhere):
	// *ShareConfigError for a bad change, which changes nothing, and
	// *FeatureLevelError before every member's build applies the
	// change. ValidateShareGroupConfig checks a change as
	// AlterShareGroupConfig does, the feature level included, writing
	// nothing.
	ShareGroupConfig(group string) ShareGroupConfig
	AlterShareGroupConfig(ctx context.Context, c AlterShareGroupConfig) (ShareGroupConfig, error)
	ValidateShareGroupConfig(c AlterShareGroupConfig) error
}

// KafkaGroups is what the Kafka group coordinator needs from the node: the
// replicated consumer group state (shared with logd's own protocol, so
// Kafka groups and logd groups are the same groups), and the commits of
// groups coordinated outside the state machine. Backend
// implements it; the contracts written on API hold.
type KafkaGroups interface {
	// ConsumerGroup and ConsumerGroups (sorted by name) return copies of
	// the replicated groups: committed offsets, and logd's own members.
	ConsumerGroup(name string) (*group.ConsumerGroup, error)
	ConsumerGroups() []*group.ConsumerGroup
	// DeleteGroup deletes a group without live members of logd's protocol
	// (group.ErrConsumerGroupNotFound, group.ErrConsumerGroupNotEmpty).
	DeleteGroup(ctx context.Context, name string) error
	// SetGroupOffsets commits or removes offsets, fenced by the group's
	// generation: group.ErrStaleGeneration when Fence is not the
	// group's generation, group.ErrUnknownMember while members of logd's
	// protocol are live, *FeatureLevelError before every member's build
	// understands such commits.
	SetGroupOffsets(ctx context.Context, c GroupSetOffsets) error
	// GroupFence returns a group's generation and its live members of
	// logd's protocol; ok is false when it does not exist.
	GroupFence(name string) (generation int64, liveMembers int, ok bool)
	// LeadsGroup reports whether this node leads the Raft group holding a
	// group's state (its home; with place, a new group is given one
	// first, else it is the home it would be given now), ready to answer
	// from it, and that group's term: the group's coordinator runs there,
	// and forgets the group's members when the term changes.
	LeadsGroup(ctx context.Context, name string, place bool) (leads bool, term uint64)
	// GroupCoordinator returns the node that leads a group's home (the
	// home it has, or would be given now), "" when none is known.
	GroupCoordinator(ctx context.Context, name string) string
	// LedConsumerGroups returns copies of the groups whose home this node
	// leads, sorted by name.
	LedConsumerGroups() []*group.ConsumerGroup
}
