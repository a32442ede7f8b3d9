package fsm

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/retention"
)

// Topic setting names, as in Kafka.
const (
	ConfigMaxMessageBytes = "max.message.bytes"
	ConfigRetentionMs     = "retention.ms"
	ConfigRetentionBytes  = "retention.bytes"
	ConfigSegmentBytes    = "segment.bytes"
	ConfigSegmentMs       = "segment.ms"
	ConfigCleanupPolicy   = "cleanup.policy"
	// ConfigDeleteRetentionMs is how long compaction keeps a tombstone
	// after its timestamp; ConfigMinCompactionLagMs how long a record stays
	// uncompacted after its timestamp.
	ConfigDeleteRetentionMs  = "delete.retention.ms"
	ConfigMinCompactionLagMs = "min.compaction.lag.ms"
	// ConfigMinCleanableDirtyRatio is the share of never-compacted bytes
	// that makes a compaction pass worth it (retention/doc.go).
	ConfigMinCleanableDirtyRatio = "min.cleanable.dirty.ratio"
	// ConfigIdempotencyWindowMs is how long an idempotency key is
	// remembered; ConfigIdempotencyMaxKeys bounds how many a topic holds
	// (the oldest is evicted beyond it).
	ConfigIdempotencyWindowMs = "idempotency.window.ms"
	ConfigIdempotencyMaxKeys  = "idempotency.max.keys"
	// ConfigQueueMaxBacklogRecords and ConfigQueueMaxBacklogBytes bound each
	// queue group's unfinished records on the topic (-1: no bound); an
	// append past a bound is refused as overloaded (apply_queue_admission.go).
	ConfigQueueMaxBacklogRecords = "queue.max.backlog.records"
	ConfigQueueMaxBacklogBytes   = "queue.max.backlog.bytes"
	// ConfigQueueMaxBacklogAgeMs bounds the age of each queue group's
	// oldest unfinished record on the topic, from its append (-1: no
	// bound); a key of QueueLevel (queueLevelKey).
	ConfigQueueMaxBacklogAgeMs = "queue.max.backlog.age.ms"
)

// maxBacklogAgeMs caps queue.max.backlog.age.ms at ten years.
const maxBacklogAgeMs = 10 * 365 * 86400 * 1000

// queueLevelKey reports whether k is a topic setting of QueueLevel: a
// build before it refuses the key, so a create-topic or alter-topic that
// sets or deletes one is written in a payload version of that level.
func queueLevelKey(k string) bool { return k == ConfigQueueMaxBacklogAgeMs }

// configSpec describes one topic setting: its default and how a value is
// checked. Defaults follow Kafka's.
type configSpec struct {
	def   string
	check func(string) error
}

func intRange(lo, hi int64) func(string) error {
	return func(s string) error {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer")
		}
		if v < lo || v > hi {
			return fmt.Errorf("must be in [%d, %d]", lo, hi)
		}
		return nil
	}
}

const maxInt64 = int64(^uint64(0) >> 1)

// maxRecordBatchLimit caps max.message.bytes: one produce batch must fit a
// Raft entry comfortably.
const maxRecordBatchLimit = 64 << 20

// maxSegmentBytes is the largest segment.bytes: a segment's index holds
// 32-bit file positions (log.Options.SegmentBytes).
const maxSegmentBytes = 1<<32 - 1

func segmentBytesRange(s string) error {
	if err := intRange(14, maxSegmentBytes)(s); err != nil {
		return fmt.Errorf("%v (a segment is at most 4 GiB-1 bytes: its index holds 32-bit positions)", err)
	}
	return nil
}

var topicConfigSpecs = map[string]configSpec{
	ConfigMaxMessageBytes: {def: "1048588", check: intRange(64, maxRecordBatchLimit)},
	ConfigRetentionMs:     {def: "604800000", check: intRange(-1, maxInt64)},
	ConfigRetentionBytes:  {def: "-1", check: intRange(-1, maxInt64)},
	ConfigSegmentBytes:    {def: "1073741824", check: segmentBytesRange},
	ConfigSegmentMs:       {def: "604800000", check: intRange(1, maxInt64)},
	// Compaction.
	ConfigDeleteRetentionMs:  {def: "86400000", check: intRange(0, maxInt64)},
	ConfigMinCompactionLagMs: {def: "0", check: intRange(0, maxInt64)},
	ConfigMinCleanableDirtyRatio: {def: "0.5", check: func(s string) error {
		if v, err := strconv.ParseFloat(s, 64); err != nil || !(v >= 0 && v <= 1) {
			return fmt.Errorf("must be a number in [0, 1]")
		}
		return nil
	}},

	// Idempotent produce.
	ConfigIdempotencyWindowMs: {def: "86400000", check: intRange(1, 365*86400000)},
	ConfigIdempotencyMaxKeys:  {def: "100000", check: intRange(1, 10_000_000)},

	// Queue admission control.
	ConfigQueueMaxBacklogRecords: {def: "-1", check: intRange(-1, maxInt64)},
	ConfigQueueMaxBacklogBytes:   {def: "-1", check: intRange(-1, maxInt64)},
	ConfigQueueMaxBacklogAgeMs: {def: "-1", check: func(s string) error {
		if err := intRange(-1, maxBacklogAgeMs)(s); err != nil || s == "0" {
			return fmt.Errorf("must be -1 (no bound) or in [1, %d]", maxBacklogAgeMs)
		}
		return nil
	}},

	ConfigCleanupPolicy: {def: "delete", check: func(s string) error {
		switch s {
		case "delete", "compact", "compact,delete", "delete,compact":
			return nil
		}
		return fmt.Errorf("must be delete, compact or compact,delete")
	}},
}

// ResolveTopicConfig validates cfg and returns it with every default filled
// in, but those of keys of QueueLevel. Unknown keys and invalid values are
// backend.ErrInvalidConfig.
func ResolveTopicConfig(cfg map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(topicConfigSpecs))
	for k, spec := range topicConfigSpecs {
		// A key of QueueLevel is stored only when set: a topic that never
		// set one has the same settings on a build before that level
		// (which refuses the key) as on this one.
		if !queueLevelKey(k) {
			out[k] = spec.def
		}
	}
	for k, v := range cfg {
		spec, ok := topicConfigSpecs[k]
		if !ok {
			return nil, fmt.Errorf("%w: unknown key %q", backend.ErrInvalidConfig, k)
		}
		if err := spec.check(v); err != nil {
			return nil, fmt.Errorf("%w: %s=%q: %v", backend.ErrInvalidConfig, k, v, err)
		}
		out[k] = v
	}
	return out, nil
}

// TopicConfigDefaults returns every topic setting with its default value,
// keys of QueueLevel included.
func TopicConfigDefaults() map[string]string {
	out := make(map[string]string, len(topicConfigSpecs))
	for k, spec := range topicConfigSpecs {
		out[k] = spec.def
	}
	return out
}

// configInt reads an integer setting of a resolved config.
func configInt(cfg map[string]string, key string) int64 {
	v, err := strconv.ParseInt(cfg[key], 10, 64)
	if err != nil {
		v, _ = strconv.ParseInt(topicConfigSpecs[key].def, 10, 64)
	}
	return v
}

// RetentionPolicy reads the topic's retention and compaction settings.
func (t *Topic) RetentionPolicy() retention.Policy {
	cfg := t.Config
	pol := cfg[ConfigCleanupPolicy]
	return retention.Policy{
		Delete:                 strings.Contains(pol, "delete"),
		Compact:                strings.Contains(pol, "compact"),
		RetentionMs:            configInt(cfg, ConfigRetentionMs),
		RetentionBytes:         configInt(cfg, ConfigRetentionBytes),
		DeleteRetentionMs:      configInt(cfg, ConfigDeleteRetentionMs),
		MinCompactionLagMs:     configInt(cfg, ConfigMinCompactionLagMs),
		MinCleanableDirtyRatio: configRatio(cfg, ConfigMinCleanableDirtyRatio),
	}
}

// configRatio reads a ratio setting; a topic created before the key
// existed gets the default.
func configRatio(cfg map[string]string, key string) float64 {
	v, err := strconv.ParseFloat(cfg[key], 64)
	if err != nil {
		v, _ = strconv.ParseFloat(topicConfigSpecs[key].def, 64)
	}
	return v
}
