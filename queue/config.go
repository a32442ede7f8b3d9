package queue

import (
	"fmt"
	"time"
)

// Defaults and bounds of queue group settings.
const (
	DefaultLease         = 30 * time.Second
	DefaultMaxDeliveries = 5
	DefaultBackoffBase   = time.Second
	DefaultBackoffMax    = 5 * time.Minute
	DefaultMaxInFlight   = 1000
	// DefaultDeadlineHeader is the record header a business deadline is
	// read from unless the group names another (or "-" for none).
	DefaultDeadlineHeader = "deadline"

	// MaxLease bounds a lease (claim or extend).
	MaxLease = 12 * time.Hour
	// MaxDeliveriesLimit bounds Config.MaxDeliveries.
	MaxDeliveriesLimit = 1000
	// MaxInFlightLimit bounds Config.MaxInFlight, the per-partition
	// in-flight cap.
	MaxInFlightLimit = 100_000
	// MaxDelay bounds backoff and explicit nack delays.
	MaxDelay = 7 * 24 * time.Hour
	// MaxWorkerLen bounds a claim's worker id.
	MaxWorkerLen = 128
	// MaxNameLen bounds a group name, leaving room for the default
	// dead-letter topic name "<topic>.<group>.dlq".
	MaxNameLen = 120
)

// NoDeadlineHeader as DeadlineHeader turns business deadlines off.
const NoDeadlineHeader = "-"

// Config is a queue group's settings. Zero fields take the defaults
// (WithDefaults); durations are nanoseconds in JSON.
type Config struct {
	// Lease is the lease of a claim that names none. Default 30 s.
	Lease time.Duration `json:"lease"`
	// MaxDeliveries: a record whose delivery count reaches it and fails
	// again (transient nack or lease expiry) is dead-lettered. Default 5.
	MaxDeliveries int `json:"max_deliveries"`
	// BackoffBase and BackoffMax shape the delay after a transient nack:
	// uniform in [0, min(BackoffMax, BackoffBase·2^(n-1))] after the n-th
	// delivery ("full jitter"). Defaults 1 s and 5 min.
	BackoffBase time.Duration `json:"backoff_base"`
	BackoffMax  time.Duration `json:"backoff_max"`
	// MaxInFlight bounds, per partition, the records delivered and not yet
	// finished (in flight, delayed or waiting for redelivery). At the cap no
	// new records are claimed from the partition, and describe and claim
	// say so. Default 1000.
	MaxInFlight int `json:"max_in_flight"`
	// AgeLimit dead-letters (reason "expired") a record older than this
	// (by its timestamp) instead of delivering it; 0 means no limit.
	AgeLimit time.Duration `json:"age_limit"`
	// DeadLetterTopic receives dead-lettered records; default
	// DefaultDeadLetterTopic(topic, group). Created when missing.
	DeadLetterTopic string `json:"dead_letter_topic"`
	// DeadlineHeader names the record header holding a business deadline
	// (RFC 3339 time or Unix milliseconds); default "deadline", "-" for none.
	DeadlineHeader string `json:"deadline_header"`
}

// DefaultDeadLetterTopic is the dead-letter topic of a group that names
// none: "<topic>.<group>.dlq", a valid Kafka topic name.
func DefaultDeadLetterTopic(topic, group string) string {
	return topic + "." + group + ".dlq"
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults(topic, group string) Config {
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.MaxDeliveries == 0 {
		c.MaxDeliveries = DefaultMaxDeliveries
	}
	if c.BackoffBase == 0 {
		c.BackoffBase = DefaultBackoffBase
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = max(DefaultBackoffMax, c.BackoffBase)
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.DeadLetterTopic == "" {
		c.DeadLetterTopic = DefaultDeadLetterTopic(topic, group)
	}
	if c.DeadlineHeader == "" {
		c.DeadlineHeader = DefaultDeadlineHeader
	}
	return c
}

// Validate checks a config with defaults applied. The topic name of the
// dead-letter topic is checked by the caller, which knows the rules.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case c.Lease <= 0 || c.Lease > MaxLease:
		return bad("lease %v must be in (0, %v]", c.Lease, MaxLease)
	case c.MaxDeliveries < 1 || c.MaxDeliveries > MaxDeliveriesLimit:
		return bad("max deliveries %d must be in [1, %d]", c.MaxDeliveries, MaxDeliveriesLimit)
	case c.BackoffBase < 0 || c.BackoffBase > MaxDelay:
		return bad("backoff base %v must be in [0, %v]", c.BackoffBase, MaxDelay)
	case c.BackoffMax < c.BackoffBase || c.BackoffMax > MaxDelay:
		return bad("backoff max %v must be in [backoff base %v, %v]", c.BackoffMax, c.BackoffBase, MaxDelay)
	case c.MaxInFlight < 1 || c.MaxInFlight > MaxInFlightLimit:
		return bad("max in flight %d must be in [1, %d]", c.MaxInFlight, MaxInFlightLimit)
	case c.AgeLimit < 0:
		return bad("age limit %v is negative", c.AgeLimit)
	case c.DeadLetterTopic == "":
		return bad("dead-letter topic is empty")
	case c.DeadlineHeader == "":
		return bad("deadline header is empty (use %q for none)", NoDeadlineHeader)
	}
	return nil
}

// ValidateName checks a queue group's name: 1 to MaxNameLen characters of
// [a-zA-Z0-9._-], so the default dead-letter topic name is a valid topic
// name.
func ValidateName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("%w: group name must have 1 to %d characters", ErrInvalidRequest, MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: group name %q: illegal character %q; only [a-zA-Z0-9._-] are allowed", ErrInvalidRequest, name, c)
		}
	}
	return nil
}
