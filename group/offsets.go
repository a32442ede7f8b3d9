package group

import (
	"fmt"
	"time"
)

// ResetStrategy says how an operator's offset reset picks new offsets.
type ResetStrategy string

// The reset strategies of `logctl group reset-offsets`.
const (
	ToEarliest ResetStrategy = "to-earliest"
	ToLatest   ResetStrategy = "to-latest"
	// ToOffset: ResetSpec.Offset.
	ToOffset ResetStrategy = "to-offset"
	// ToTime: the first offset whose record time is at or after
	// ResetSpec.Time (the caller looks it up: PartitionBounds.AtTime).
	ToTime ResetStrategy = "to-datetime"
	// ShiftBy: the current committed offset plus ResetSpec.Shift (from the
	// log start when nothing is committed).
	ShiftBy ResetStrategy = "shift-by"
)

// ResetSpec is one reset request for a partition. A "--by-duration D"
// reset is ToTime with Time = now - D, computed by the caller.
type ResetSpec struct {
	Strategy ResetStrategy
	Offset   int64
	Time     time.Time
	Shift    int64
}

// Validate checks a spec.
func (s ResetSpec) Validate() error {
	switch s.Strategy {
	case ToEarliest, ToLatest, ShiftBy:
	case ToOffset:
		if s.Offset < 0 {
			return fmt.Errorf("%w: reset to negative offset %d", ErrInvalidGroupRequest, s.Offset)
		}
	case ToTime:
		if s.Time.IsZero() {
			return fmt.Errorf("%w: reset to a time without a time", ErrInvalidGroupRequest)
		}
	default:
		return fmt.Errorf("%w: unknown reset strategy %q", ErrInvalidGroupRequest, s.Strategy)
	}
	return nil
}

// PartitionBounds are a partition's offsets as the planner sees them.
type PartitionBounds struct {
	Start, End int64
	// AtTime is the first offset at or after ResetSpec.Time (End if none);
	// used only by ToTime.
	AtTime int64
}

// PlannedReset is one partition's line of a reset plan.
type PlannedReset struct {
	TopicPartition
	// Current is the committed offset before the reset; -1 for none.
	Current int64 `json:"current"`
	// New is the offset the reset commits, within [log start, end].
	New int64 `json:"new"`
	// Clamped is set when the requested offset was outside the log and
	// New is the nearest bound; Requested is what was asked.
	Clamped   bool  `json:"clamped,omitempty"`
	Requested int64 `json:"requested"`
	// LagBefore and LagAfter are the lag in records before and after.
	LagBefore int64 `json:"lag_before"`
	LagAfter  int64 `json:"lag_after"`
}

// PlanReset computes one partition's line of a reset plan: the requested
// offset, clamped to [Start, End].
func PlanReset(tp TopicPartition, current int64, b PartitionBounds, s ResetSpec) PlannedReset {
	var want int64
	switch s.Strategy {
	case ToEarliest:
		want = b.Start
	case ToLatest:
		want = b.End
	case ToOffset:
		want = s.Offset
	case ToTime:
		want = b.AtTime
	case ShiftBy:
		base := current
		if base < 0 {
			base = b.Start
		}
		want = cgSaturatingAdd(base, s.Shift)
	}
	pr := PlannedReset{TopicPartition: tp, Current: current, Requested: want, New: min(max(want, b.Start), b.End)}
	pr.Clamped = pr.New != want
	pr.LagBefore = LagRecords(current, b.Start, b.End)
	pr.LagAfter = LagRecords(pr.New, b.Start, b.End)
	return pr
}

// LagRecords is how many records of [start, end) a group has not
// committed: end - committed, or end - start when nothing is committed or
// the committed offset fell below the log start.
func LagRecords(committed, start, end int64) int64 {
	from := max(committed, start)
	if committed < 0 {
		from = start
	}
	return max(end-from, 0)
}

// StartPosition is where a member starts reading a partition: the
// committed offset if there is one, else by its reset policy from the
// log's bounds. ok is false when the policy is none and nothing is
// committed (ErrNoResetPolicy).
func StartPosition(committed int64, policy ResetPolicy, start, end int64) (pos int64, ok bool) {
	if committed >= 0 {
		return committed, true
	}
	switch policy {
	case ResetLatest:
		return end, true
	case ResetNone:
		return -1, false
	}
	return start, true
}

// AutoResetTarget is where a position below the log start moves under a
// reset policy; ok is false for none.
func AutoResetTarget(policy ResetPolicy, start, end int64) (int64, bool) {
	switch policy {
	case ResetLatest:
		return end, true
	case ResetNone:
		return 0, false
	}
	return start, true
}

func cgSaturatingAdd(a, b int64) int64 {
	s := a + b
	switch {
	case b > 0 && s < a:
		return 1<<63 - 1
	case b < 0 && s > a:
		return -1 << 63
	}
	return s
}
