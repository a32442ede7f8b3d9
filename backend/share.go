package backend

import "time"

// ShareGroupConfig is a Kafka share group's settings, the GROUP resource
// of IncrementalAlterConfigs and DescribeConfigs (docs/kafka.md, "Share
// groups"), replicated in the meta group. A zero field is not set: the
// Kafka listener's default applies.
type ShareGroupConfig struct {
	// AutoOffsetReset is where a queue group a heartbeat creates starts:
	// "earliest" or "latest" ("" when not set: latest).
	AutoOffsetReset string
	// RecordLockDuration is the lease of the share consumers' claims and
	// renewals.
	RecordLockDuration time.Duration
	// DeliveryCountLimit is the max deliveries of the group's queue
	// groups.
	DeliveryCountLimit int
}

// Names of the share-group settings, Kafka 4.2's (its GroupConfig), as
// AlterShareGroupConfig takes them.
const (
	ShareAutoOffsetReset      = "share.auto.offset.reset"
	ShareRecordLockDurationMs = "share.record.lock.duration.ms"
	ShareDeliveryCountLimit   = "share.delivery.count.limit"
)

// AlterShareGroupConfig changes a share group's settings: Set sets the
// settings it names to their values (as Kafka writes them: "earliest",
// milliseconds, a count), Delete returns the settings it names to their
// defaults. A setting named twice, or unknown, or a value out of range,
// refuses the whole change (*ShareConfigError).
type AlterShareGroupConfig struct {
	Group  string
	Set    map[string]string
	Delete []string
}
