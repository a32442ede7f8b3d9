package replication

import "github.com/logd-dev/logd/replication/fsm"

// The state machine's types under the names the front ends use: aliases,
// so a value of one is a value of the other. Their documentation is in
// package fsm.
type (
	// FSM is the replicated state machine (Node.FSM, for reads).
	FSM = fsm.FSM
	// FeatureLevel numbers the command kinds a build understands (see
	// JoinRequest).
	FeatureLevel = fsm.FeatureLevel
	// Topic is a topic as applied on this node.
	Topic = fsm.Topic
	// Partition is one partition's log plus a way to wait for appends.
	Partition = fsm.Partition

	// CreateTopic creates a topic with its partitions.
	CreateTopic = fsm.CreateTopic
	// AlterTopic sets topic settings.
	AlterTopic = fsm.AlterTopic
	// CreatePartitions grows a topic's partition count.
	CreatePartitions = fsm.CreatePartitions
	// PartitionCountError says why a growth's count was refused.
	PartitionCountError = fsm.PartitionCountError
	// Append appends record batches to partitions of one topic.
	Append = fsm.Append
	// PartitionBatch is one record batch destined for one partition.
	PartitionBatch = fsm.PartitionBatch
	// RecordKey is a record's idempotency key and payload digest.
	RecordKey = fsm.RecordKey

	// GroupJoin adds a member to a consumer group.
	GroupJoin = fsm.GroupJoin
	// GroupHeartbeat keeps a member alive.
	GroupHeartbeat = fsm.GroupHeartbeat
	// GroupLeave removes a member.
	GroupLeave = fsm.GroupLeave
	// GroupCommit commits offsets.
	GroupCommit = fsm.GroupCommit
	// GroupResetOffsets sets committed offsets (an operator's reset).
	GroupResetOffsets = fsm.GroupResetOffsets
	// GroupAutoReset moves a committed offset under the reset policy.
	GroupAutoReset = fsm.GroupAutoReset

	// QueueCreate creates a queue group.
	QueueCreate = fsm.QueueCreate
	// QueueClaim claims records under a lease.
	QueueClaim = fsm.QueueClaim
	// QueueAck acknowledges deliveries.
	QueueAck = fsm.QueueAck
	// QueueNack fails deliveries.
	QueueNack = fsm.QueueNack
	// QueueExtend extends leases.
	QueueExtend = fsm.QueueExtend
	// QueueClaimResult is the outcome of an applied claim.
	QueueClaimResult = fsm.QueueClaimResult
	// QueueTokensResult is the outcome of an applied ack, nack or extend.
	QueueTokensResult = fsm.QueueTokensResult
	// QueuePauseResult says whether a pause changed the group.
	QueuePauseResult = fsm.QueuePauseResult
	// OverloadedError says which group and bound refused an append.
	OverloadedError = fsm.OverloadedError
	// TopicQuota bounds the cluster's topics and partitions (Config.Quota).
	TopicQuota = fsm.TopicQuota
	// QuotaError says which quota refused a topic's creation.
	QuotaError = fsm.QuotaError
	// QueueGroupInfo describes a queue group and its partitions.
	QueueGroupInfo = fsm.QueueGroupInfo

	// CleanerCounters are the totals of the retention commands applied.
	CleanerCounters = fsm.CleanerCounters
)

// Topic setting names, as in Kafka (see package fsm), and the retry hint of
// an overloaded append.
const (
	ConfigSegmentBytes        = fsm.ConfigSegmentBytes
	ConfigCleanupPolicy       = fsm.ConfigCleanupPolicy
	DefaultOverloadRetryAfter = fsm.DefaultOverloadRetryAfter
)
