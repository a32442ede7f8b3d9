package kafka

import (
	"context"

	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/replication"
)

// Backend is what the Kafka front end needs from the node, declared here by
// its consumer as server/backend.go declares the Connect API's; the
// contracts written there hold for these methods too (copies the caller
// owns, Kafka's offsets, typed errors, writes answered after commit).
// replication.Backend implements it.
type Backend interface {
	// NodeID is this node's id and APIAddress its registered client API
	// address; Ready and IsLeader are as in server.ClusterBackend.
	NodeID() string
	APIAddress() string
	Ready() bool
	IsLeader() bool
	// Status is this node's view of the Raft group: its members (the
	// brokers Metadata lists, the voters being every partition's
	// replicas) and its leader.
	Status() replication.Status
	// RaftMetrics holds, on the leader, when each follower last answered
	// it (replication.Node.RaftMetrics): the voters that answered lately
	// are a partition's in-sync replicas.
	RaftMetrics() replication.RaftMetrics
	// NodeKafkaAddress returns the Kafka address a node registered (its
	// --kafka-advertise); false when it registered none (no Kafka
	// listener, or a build before the field).
	NodeKafkaAddress(id string) (string, bool)
	// NodeAPIAddress returns a node's registered client API address, from
	// which the Kafka address of a node that registered none is derived
	// (Options.PeerAddress).
	NodeAPIAddress(id string) (string, bool)

	// Topics.
	CreateTopic(ctx context.Context, c replication.CreateTopic) (replication.TopicInfo, error)
	AlterTopic(ctx context.Context, c replication.AlterTopic) (replication.TopicInfo, error)
	DeleteTopic(ctx context.Context, name string) error
	Topic(name string) (replication.TopicInfo, error)
	Topics() []replication.TopicInfo
	// ValidateCreateTopic and ValidateAlterTopic check a change as the
	// write would, writing nothing (a request to validate only);
	// TopicConfigDefaults lists every topic setting with its default.
	ValidateCreateTopic(c replication.CreateTopic) error
	ValidateAlterTopic(c replication.AlterTopic) error
	TopicConfigDefaults() map[string]string
	// CreatePartitions grows a topic's partition count, never shrinking
	// it; ValidateCreatePartitions checks the same, writing nothing.
	CreatePartitions(ctx context.Context, c replication.CreatePartitions) (replication.TopicInfo, error)
	ValidateCreatePartitions(c replication.CreatePartitions) error

	// Append appends record batches as they are, one per partition of one
	// topic, in one Raft entry, and returns each batch's base offset once
	// committed and applied (replication.Node.Append).
	Append(ctx context.Context, a replication.Append) ([]int64, error)
	// CheckCompression says whether batches of a codec may be appended
	// now: snappy, lz4 and zstd only once every member's build reads them
	// (replication.Node.CheckCompression).
	CheckCompression(c batch.Compression) error
	// Read, Offsets and OffsetForTime are as in server.RecordBackend.
	Read(topic string, partition int32, offset int64, maxBytes int) (replication.ReadResult, error)
	Offsets(topic string, partition int32) (replication.Offsets, error)
	OffsetForTime(topic string, partition int32, tsMillis int64) (int64, error)

	// Consumer groups (group_backend.go).
	GroupBackend
}

var _ Backend = (*replication.Backend)(nil)
