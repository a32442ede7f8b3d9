package backend

// TopicInfo is a topic's identity and settings, a copy the caller owns.
type TopicInfo struct {
	Name       string
	Partitions int32
	// Config holds every setting with its effective value.
	Config map[string]string
	// CreatedNanos is the creating command's time, Unix nanoseconds.
	CreatedNanos int64
	// Placement is the data group of each partition, by index; nil for
	// a topic whose partitions are all in the meta group
	// (docs/architecture.md, "Data groups").
	Placement []uint64
}

// PartitionState is one partition's log on this node: its offsets are the
// half-open range [LogStartOffset, EndOffset) of records held.
type PartitionState struct {
	Partition      int32
	LogStartOffset int64
	EndOffset      int64
	// Bytes is the size of the partition's segments.
	Bytes             int64
	Segments          int32
	CompactedSegments int32
	// LastCleanerRun is the last retention or compaction run applied to
	// the partition on this node; nil if none.
	LastCleanerRun *CleanerRun
	// Group is the data group that holds the partition (0: the meta
	// group), and Leader the node this node knows leads it ("" when
	// none: this node holds no replica of the group, or no leader is
	// known).
	Group  uint64
	Leader string
}

// IdempotencyStats describes a topic's idempotency window.
type IdempotencyStats struct {
	// Keys held now.
	Keys int64
	// Evicted counts keys dropped before their window ended because the
	// topic reached idempotency.max.keys; Expired keys dropped at its end.
	Evicted, Expired int64
}

// TopicState is a topic with each partition's state, for describes and
// metrics.
type TopicState struct {
	Topic       TopicInfo
	Partitions  []PartitionState
	Idempotency IdempotencyStats
}

// Offsets are a partition's bounds: it holds [LogStart, End).
type Offsets struct {
	LogStart, End int64
}

// CleanerRun describes the last retention or compaction command that
// changed a partition on this node. It comes from the command and the log
// only, so it is the same on every replica; it is kept in snapshots
// (cleaner_snapshot.go), and replayed commands that change nothing (a trim
// already done, a compaction whose sources are gone) do not replace it.
type CleanerRun struct {
	// TimeNanos is the command's (leader-stamped) time.
	TimeNanos int64
	// Action is "trim" or "compact".
	Action string
	// BytesDeleted is how much smaller the partition became.
	BytesDeleted int64
	// RecordsRemoved counts records compaction dropped.
	RecordsRemoved int64
}

// CleanerCounters are totals over the retention commands this node applied.
type CleanerCounters struct {
	BytesDeleted     int64 // by trims and compactions
	RecordsCompacted int64 // records compaction removed
	Trims            int64
	Compactions      int64
}

// MaxPartitions bounds a topic's partition count.
const MaxPartitions = 10000

// CreateTopic asks for a topic with its partitions and settings (Kafka's
// names: retention.ms, cleanup.policy, ...; unnamed settings take their
// defaults). The backend adds what the cluster decides: its quota and the
// calling principal.
type CreateTopic struct {
	Name       string
	Partitions int32
	Config     map[string]string
}

// AlterTopic sets topic settings; keys not named keep their value. Keys in
// Delete return to their default; a key may not be both set and deleted.
type AlterTopic struct {
	Name   string
	Config map[string]string
	Delete []string
}

// CreatePartitions grows a topic to Count partitions; counts never shrink.
type CreatePartitions struct {
	Name  string
	Count int32
}

// TopicQuota bounds the cluster's topics and partitions, in all and per
// creating principal; zero fields are unbounded.
type TopicQuota struct {
	MaxTopics                 int64
	MaxPartitions             int64
	MaxTopicsPerPrincipal     int64
	MaxPartitionsPerPrincipal int64
}

// IsZero reports whether q bounds nothing.
func (q TopicQuota) IsZero() bool {
	return q.MaxTopics <= 0 && q.MaxPartitions <= 0 && q.MaxTopicsPerPrincipal <= 0 && q.MaxPartitionsPerPrincipal <= 0
}
