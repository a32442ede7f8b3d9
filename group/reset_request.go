package group

import (
	"fmt"
	"time"
)

// ResetRequest is an offset reset as a client states it: a strategy name
// as on the wire ("explicit", "by-duration", or a ResetStrategy) and its
// arguments.
type ResetRequest struct {
	Strategy string
	// Explicit are the offsets of an "explicit" reset.
	Explicit []PartitionOffset
	// Offset (to-offset), Shift (shift-by), TimestampMs (to-datetime) and
	// DurationMs (by-duration: now minus the duration).
	Offset, Shift, TimestampMs, DurationMs int64
}

// PartitionOffset is one partition's offset in an explicit reset.
type PartitionOffset struct {
	TopicPartition
	Offset int64
}

// ParseReset turns a request into a ResetSpec, or for an explicit reset
// into per-partition offsets. now resolves "by-duration". Invalid requests
// are ErrInvalidGroupRequest.
func ParseReset(r ResetRequest, now time.Time) (ResetSpec, map[TopicPartition]int64, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidGroupRequest, fmt.Sprintf(format, args...))
	}
	switch r.Strategy {
	case "explicit":
		if len(r.Explicit) == 0 {
			return ResetSpec{}, nil, invalid("explicit reset without offsets")
		}
		ex := make(map[TopicPartition]int64, len(r.Explicit))
		for _, o := range r.Explicit {
			if o.Offset < 0 {
				return ResetSpec{}, nil, invalid("explicit reset: negative offset %d for %s/%d", o.Offset, o.Topic, o.Partition)
			}
			ex[o.TopicPartition] = o.Offset
		}
		return ResetSpec{}, ex, nil
	case "by-duration":
		if r.DurationMs < 0 {
			return ResetSpec{}, nil, invalid("negative duration %d ms", r.DurationMs)
		}
		return ResetSpec{Strategy: ToTime, Time: now.Add(-time.Duration(r.DurationMs) * time.Millisecond)}, nil, nil
	}
	spec := ResetSpec{Strategy: ResetStrategy(r.Strategy), Offset: r.Offset, Shift: r.Shift}
	if spec.Strategy == ToTime {
		if r.TimestampMs < 0 {
			return ResetSpec{}, nil, invalid("negative timestamp %d", r.TimestampMs)
		}
		spec.Time = time.UnixMilli(r.TimestampMs)
		if r.TimestampMs == 0 {
			spec.Time = time.Unix(0, 1) // the epoch itself, not "no time"
		}
	}
	if err := spec.Validate(); err != nil {
		return ResetSpec{}, nil, err
	}
	return spec, nil, nil
}
