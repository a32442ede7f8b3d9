package server

import (
	"context"
	"io"
	"time"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/queue"
	"github.com/logd-dev/logd/replication"
	"github.com/logd-dev/logd/replication/transport"
)

// Backend is everything the handlers need from the node: the handlers
// decode a request, call the backend and map its errors (errors.go); they
// hold no storage and see nothing of Raft. replication.Backend implements
// it. A second front end (the Kafka protocol) declares its own interface
// with the same methods; these contracts hold for both.
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
//     forwards writes to the leader before that, forward.go).
//   - Errors match the sentinels and types below with errors.Is/As, and
//     errors.go maps each to its code. Every method may fail with
//     ErrStopped (the state machine stopped after an I/O error), and every
//     write with ErrNotLeader, ErrTimeout (outcome unknown) and ErrShutdown.
//
// The caller's principal travels in the context: a front end that
// authenticates sets it with replication.WithPrincipal before calling the
// backend, and replication.PrincipalFrom reads it (Anonymous when unset),
// for audit; the server authorizes calls itself (authz.go) from the
// security state below.
type Backend interface {
	ClusterBackend
	TopicBackend
	RecordBackend
	GroupBackend
	QueueBackend
	RedriveBackend
	StatsBackend
	SecurityBackend
}

// ClusterBackend is the node and its cluster.
type ClusterBackend interface {
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
	Status() replication.Status
	// Backup streams a backup of the state at one Raft index into the
	// writer start returns, on the leader only (ErrNotLeader elsewhere);
	// start is called once, with the backup's description, before any
	// byte is written (replication/backup.go).
	Backup(ctx context.Context, start func(replication.BackupInfo) (io.Writer, error)) (replication.BackupInfo, error)
	// Now is the node's clock, the one that stamps its commands: a
	// handler that answers by time (queue describe) reads it, so it
	// answers by the same time the node decides by.
	Now() time.Time
	// Join checks a node through probe, adds it as a non-voter and
	// promotes it once probe shows it caught up (ErrNodeUnreachable,
	// ErrNodeConflict, ErrNoQuorum, ErrMembershipChange); RemoveNode
	// removes one (ErrUnknownNode, ErrMembershipChange);
	// TransferLeadership hands leadership to a voter ("" for any).
	Join(ctx context.Context, req replication.JoinRequest, probe replication.NodeProbe) error
	RemoveNode(ctx context.Context, id string) error
	TransferLeadership(ctx context.Context, id string) error
}

// TopicBackend creates, changes and describes topics. Errors:
// ErrInvalidTopicName, ErrUnknownTopic, ErrTopicExists, ErrInvalidConfig,
// ErrInvalidArgument.
type TopicBackend interface {
	CreateTopic(ctx context.Context, c replication.CreateTopic) (replication.TopicInfo, error)
	AlterTopic(ctx context.Context, c replication.AlterTopic) (replication.TopicInfo, error)
	// CreatePartitions grows a topic's partition count; never shrinks it
	// (*replication.PartitionCountError), within the quota
	// (*replication.QuotaError). ValidateCreatePartitions checks the same
	// without proposing.
	CreatePartitions(ctx context.Context, c replication.CreatePartitions) (replication.TopicInfo, error)
	ValidateCreatePartitions(c replication.CreatePartitions) error
	DeleteTopic(ctx context.Context, name string) error
	Topic(name string) (replication.TopicInfo, error)
	// Topics and TopicStates are sorted by name.
	Topics() []replication.TopicInfo
	DescribeTopic(name string) (replication.TopicState, error)
	TopicStates() []replication.TopicState
	// TopicQuota is the quota this node writes into the creations it
	// proposes (CreateTopic fails with *replication.QuotaError past it),
	// and the cluster's counts of topics and partitions.
	TopicQuota() (q replication.TopicQuota, topics, partitions int64)
}

// RecordBackend writes and reads records.
type RecordBackend interface {
	// Produce appends a call's records whole or not at all, routing and
	// deduplicating them (replication.Backend.Produce lists its errors).
	Produce(ctx context.Context, req replication.ProduceRequest) (replication.ProduceResult, error)
	// Read returns whole stored RecordBatch v2 batches from offset, up to
	// maxBytes but at least one batch, as stored (no re-encoding), copied
	// out: the caller owns them and releases nothing. Its Changed channel,
	// taken before the read, is closed by the next append: a long poll
	// that read nothing waits on it (or on its deadline) and reads again.
	// Errors: ErrUnknownTopic, ErrUnknownPartition, *OutOfRangeError
	// (with the bounds), ErrCorrupt, ErrLogClosed (topic deleted).
	Read(topic string, partition int32, offset int64, maxBytes int) (replication.ReadResult, error)
	// Offsets returns a partition's bounds; OffsetForTime the first offset
	// whose batch's max timestamp is at or after tsMillis (the end when
	// none is).
	Offsets(topic string, partition int32) (replication.Offsets, error)
	OffsetForTime(topic string, partition int32, tsMillis int64) (int64, error)
}

// GroupBackend is consumer groups (package group's errors: fencing with
// ErrStaleGeneration, ErrNotAssigned, ErrUnknownMember; and
// ErrConsumerGroupNotFound, ErrConsumerGroupNotEmpty, ErrOffsetAboveEnd,
// ErrNoResetPolicy, ErrUnknownGroupTopic, ErrInvalidGroupRequest; and
// replication.ErrBehind).
type GroupBackend interface {
	JoinGroup(ctx context.Context, c replication.GroupJoin) (group.Assignment, error)
	GroupHeartbeat(ctx context.Context, c replication.GroupHeartbeat) (group.Assignment, error)
	LeaveGroup(ctx context.Context, c replication.GroupLeave) error
	CommitGroupOffsets(ctx context.Context, c replication.GroupCommit) error
	ResetGroupOffsets(ctx context.Context, c replication.GroupResetOffsets) error
	// AutoResetGroupOffset moves a member's committed offset that fell
	// below the log start by its reset policy; it returns the new one.
	AutoResetGroupOffset(ctx context.Context, c replication.GroupAutoReset) (int64, error)
	DeleteGroup(ctx context.Context, name string) error
	// ConsumerGroup and ConsumerGroups (sorted by name) return copies.
	ConsumerGroup(name string) (*group.ConsumerGroup, error)
	// ExternalGroup returns a group as the leader's Kafka group
	// coordinator holds it (its members live in that memory only): none
	// on a follower (replication.Backend.ExternalGroup).
	ExternalGroup(name string) replication.ExternalGroup
	ConsumerGroups() []*group.ConsumerGroup
	// AwaitGroupFetch refuses a read by a member that does not own the
	// partition at its generation (the fencing errors). A node that has
	// not applied the member's generation or offset yet (a follower right
	// after the member's forwarded join) first waits up to wait for it,
	// then fails with *replication.BehindError (ErrBehind), which names
	// the leader.
	AwaitGroupFetch(ctx context.Context, c replication.GroupFetchCheck, wait time.Duration) error
	// GroupLag is a group's lag in a partition at a committed offset.
	GroupLag(topic string, partition int32, committed int64, now time.Time) (replication.Lag, error)
}

// RedriveBackend is redrive jobs, run by the leader (replication
// redrive.go). Errors: ErrUnknownTopic, ErrInvalidArgument,
// ErrUnknownRedrive, *FeatureLevelError.
type RedriveBackend interface {
	StartRedrive(ctx context.Context, s replication.RedriveSpec) (replication.RedriveJob, error)
	StopRedrive(ctx context.Context, id string) (replication.RedriveJob, error)
	RedriveJob(id string) (replication.RedriveJob, error)
	RedriveJobs() []replication.RedriveJob
	// RedrivePosition is a job's position, per dead-letter partition.
	RedrivePosition(j replication.RedriveJob) []int64
}

// QueueBackend is queue groups (package queue's errors: ErrGroupNotFound,
// ErrGroupExists, ErrInvalidConfig, ErrInvalidRequest, ErrBadToken,
// ErrStaleToken; and *OverloadedError from Produce when a queue group's
// backlog is full).
type QueueBackend interface {
	CreateQueueGroup(ctx context.Context, c replication.QueueCreate) (queue.Config, error)
	AlterQueueGroup(ctx context.Context, topic, name string, change func(*queue.Config)) (queue.Config, error)
	PauseQueueGroup(ctx context.Context, topic, name string, paused bool) (replication.QueuePauseResult, error)
	// QueueClaimWait claims records, long-polling up to wait while none is
	// claimable.
	QueueClaimWait(ctx context.Context, c replication.QueueClaim, wait time.Duration) (replication.QueueClaimResult, error)
	QueueAck(ctx context.Context, c replication.QueueAck) (replication.QueueTokensResult, error)
	QueueNack(ctx context.Context, c replication.QueueNack) (replication.QueueTokensResult, error)
	QueueExtend(ctx context.Context, c replication.QueueExtend) (replication.QueueTokensResult, error)
	// DescribeQueueGroup describes a group at now (Unix ns); QueueGroups
	// lists a topic's groups, sorted.
	DescribeQueueGroup(topic, name string, now int64) (replication.QueueGroupInfo, error)
	QueueGroups(topic string) []string
	// QueueInFlight lists a group's records under a live lease at now, at
	// most limit of them, and whether the list was cut.
	QueueInFlight(topic, name string, now int64, limit int) ([]queue.InFlightRecord, bool, error)
}

// SecurityBackend is the cluster's tokens and ACLs, replicated state
// (docs/security.md). Token and ACLs are read on every call: they take no
// lock and, for ACLs, return an immutable set the caller may keep.
// CreateToken stores a verifier (never the secret) with the principal
// that created it; RevokeToken removes one and returns what it was
// (ErrUnknownToken). CreateACLs adds ACLs, keeping those already present
// once, and returns how many were new; DeleteACLs removes those f
// matches and returns them (with dryRun, only returns them). Errors:
// ErrTokenExists, ErrTooManyTokens, ErrTooManyACLs, and auth's
// ErrInvalidToken and ErrInvalidACL for values that do not validate.
type SecurityBackend interface {
	CreateToken(ctx context.Context, v auth.Verifier, createdBy string) error
	RevokeToken(ctx context.Context, id string) (replication.TokenInfo, error)
	// Tokens lists the stored tokens' public fields, sorted by id.
	Tokens() []replication.TokenInfo
	Token(id string) (auth.Verifier, bool)
	CreateACLs(ctx context.Context, acls []auth.ACL) (created int, err error)
	DeleteACLs(ctx context.Context, f auth.Filter, dryRun bool) ([]auth.ACL, error)
	ACLs() *auth.Set
}

// StatsBackend feeds /metrics.
type StatsBackend interface {
	CleanerCounters() replication.CleanerCounters
	CleanerStats() replication.CleanerStats
	// RaftConnStats counts the connections of the node's Raft port
	// (raft_metrics.go); zero for a node without one.
	RaftConnStats() transport.ConnStats
	// RaftMetrics are Raft's timings, leader changes and, on the leader,
	// what each follower last answered (raft_metrics.go).
	RaftMetrics() replication.RaftMetrics
	// DiskUsage is the file system of the node's data directory.
	DiskUsage() (replication.DiskUsage, error)
}

var _ Backend = (*replication.Backend)(nil)
