package kafka

import (
	"time"
)

// Defaults of GroupOptions.
const (
	// DefaultMinSessionTimeout and DefaultMaxSessionTimeout bound the
	// session timeout a member asks for, as Kafka's
	// group.min.session.timeout.ms and group.max.session.timeout.ms.
	DefaultMinSessionTimeout = 6 * time.Second
	DefaultMaxSessionTimeout = 30 * time.Minute
	// DefaultInitialRebalanceDelay is how long a group that was empty
	// waits for more members before its first generation, as Kafka's
	// group.initial.rebalance.delay.ms: consumers started together then
	// share one rebalance.
	DefaultInitialRebalanceDelay = 3 * time.Second
	// DefaultMaxGroupMembers bounds one group's members (joined and
	// waiting to), as Kafka's group.max.size.
	DefaultMaxGroupMembers = 1000
	// DefaultMaxGroupBytes bounds the memory of every group's members:
	// their ids, subscriptions and assignments.
	DefaultMaxGroupBytes = 64 << 20
)

// GroupOptions configures the group coordinator. The zero value takes the
// defaults; a negative InitialRebalanceDelay waits for nothing.
type GroupOptions struct {
	MinSessionTimeout     time.Duration
	MaxSessionTimeout     time.Duration
	InitialRebalanceDelay time.Duration
	MaxGroupMembers       int
	MaxGroupBytes         int64
	// ShareSessionTimeout, ShareHeartbeatInterval, ShareLockDuration and
	// MaxShareSessions configure share groups (share_coordinator.go's
	// defaults, Kafka's).
	ShareSessionTimeout    time.Duration
	ShareHeartbeatInterval time.Duration
	ShareLockDuration      time.Duration
	MaxShareSessions       int
}

func (o GroupOptions) withDefaults() GroupOptions {
	if o.MinSessionTimeout <= 0 {
		o.MinSessionTimeout = DefaultMinSessionTimeout
	}
	if o.MaxSessionTimeout <= 0 {
		o.MaxSessionTimeout = DefaultMaxSessionTimeout
	}
	switch {
	case o.InitialRebalanceDelay == 0:
		o.InitialRebalanceDelay = DefaultInitialRebalanceDelay
	case o.InitialRebalanceDelay < 0:
		o.InitialRebalanceDelay = 0
	}
	if o.MaxGroupMembers <= 0 {
		o.MaxGroupMembers = DefaultMaxGroupMembers
	}
	if o.MaxGroupBytes <= 0 {
		o.MaxGroupBytes = DefaultMaxGroupBytes
	}
	if o.ShareSessionTimeout <= 0 {
		o.ShareSessionTimeout = DefaultShareSessionTimeout
	}
	if o.ShareHeartbeatInterval <= 0 {
		o.ShareHeartbeatInterval = DefaultShareHeartbeatInterval
	}
	if o.ShareLockDuration <= 0 {
		o.ShareLockDuration = DefaultShareLockDuration
	}
	if o.MaxShareSessions <= 0 {
		o.MaxShareSessions = DefaultMaxShareSessions
	}
	return o
}
