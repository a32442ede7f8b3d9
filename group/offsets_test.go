package group

import (
	"testing"
	"time"
)

func TestPlanReset(t *testing.T) {
	tp := TopicPartition{"orders", 0}
	b := PartitionBounds{Start: 10, End: 50, AtTime: 30}
	tests := []struct {
		name    string
		current int64
		spec    ResetSpec
		want    PlannedReset
	}{
		{name: "earliest", current: 40, spec: ResetSpec{Strategy: ToEarliest}, want: PlannedReset{Current: 40, New: 10, Requested: 10, LagBefore: 10, LagAfter: 40}},
		{name: "latest", current: 40, spec: ResetSpec{Strategy: ToLatest}, want: PlannedReset{Current: 40, New: 50, Requested: 50, LagBefore: 10, LagAfter: 0}},
		{name: "offset in range", current: -1, spec: ResetSpec{Strategy: ToOffset, Offset: 20}, want: PlannedReset{Current: -1, New: 20, Requested: 20, LagBefore: 40, LagAfter: 30}},
		{name: "offset below start clamps", current: 40, spec: ResetSpec{Strategy: ToOffset, Offset: 3}, want: PlannedReset{Current: 40, New: 10, Requested: 3, Clamped: true, LagBefore: 10, LagAfter: 40}},
		{name: "offset above end clamps", current: 40, spec: ResetSpec{Strategy: ToOffset, Offset: 99}, want: PlannedReset{Current: 40, New: 50, Requested: 99, Clamped: true, LagBefore: 10, LagAfter: 0}},
		{name: "time", current: 45, spec: ResetSpec{Strategy: ToTime, Time: time.Unix(1, 0)}, want: PlannedReset{Current: 45, New: 30, Requested: 30, LagBefore: 5, LagAfter: 20}},
		{name: "shift back", current: 45, spec: ResetSpec{Strategy: ShiftBy, Shift: -5}, want: PlannedReset{Current: 45, New: 40, Requested: 40, LagBefore: 5, LagAfter: 10}},
		{name: "shift forward past end", current: 45, spec: ResetSpec{Strategy: ShiftBy, Shift: 10}, want: PlannedReset{Current: 45, New: 50, Requested: 55, Clamped: true, LagBefore: 5, LagAfter: 0}},
		{name: "shift without commit starts at log start", current: -1, spec: ResetSpec{Strategy: ShiftBy, Shift: 2}, want: PlannedReset{Current: -1, New: 12, Requested: 12, LagBefore: 40, LagAfter: 38}},
		{name: "shift saturates", current: 45, spec: ResetSpec{Strategy: ShiftBy, Shift: 1<<63 - 1}, want: PlannedReset{Current: 45, New: 50, Requested: 1<<63 - 1, Clamped: true, LagBefore: 5, LagAfter: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.spec.Validate(); err != nil {
				t.Fatal(err)
			}
			tt.want.TopicPartition = tp
			if got := PlanReset(tp, tt.current, b, tt.spec); got != tt.want {
				t.Fatalf("PlanReset = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestLagAndPositions(t *testing.T) {
	tests := []struct {
		committed, start, end int64
		policy                ResetPolicy
		lag, pos              int64
		ok                    bool
	}{
		{committed: 5, start: 0, end: 9, policy: ResetEarliest, lag: 4, pos: 5, ok: true},
		{committed: -1, start: 2, end: 9, policy: ResetEarliest, lag: 7, pos: 2, ok: true},
		{committed: -1, start: 2, end: 9, policy: ResetLatest, lag: 7, pos: 9, ok: true},
		{committed: -1, start: 2, end: 9, policy: ResetNone, lag: 7, pos: -1, ok: false},
		{committed: 1, start: 4, end: 9, policy: ResetNone, lag: 5, pos: 1, ok: true},
		{committed: 9, start: 4, end: 9, policy: ResetNone, lag: 0, pos: 9, ok: true},
	}
	for _, tt := range tests {
		if got := LagRecords(tt.committed, tt.start, tt.end); got != tt.lag {
			t.Errorf("LagRecords(%d, %d, %d) = %d, want %d", tt.committed, tt.start, tt.end, got, tt.lag)
		}
		pos, ok := StartPosition(tt.committed, tt.policy, tt.start, tt.end)
		if pos != tt.pos || ok != tt.ok {
			t.Errorf("StartPosition(%d, %s) = %d %v, want %d %v", tt.committed, tt.policy, pos, ok, tt.pos, tt.ok)
		}
	}
	if _, ok := AutoResetTarget(ResetNone, 1, 2); ok {
		t.Error("AutoResetTarget(none) ok")
	}
	if to, _ := AutoResetTarget(ResetLatest, 1, 2); to != 2 {
		t.Errorf("AutoResetTarget(latest) = %d", to)
	}
	if (ResetSpec{Strategy: "sideways"}).Validate() == nil || (ResetSpec{Strategy: ToOffset, Offset: -1}).Validate() == nil || (ResetSpec{Strategy: ToTime}).Validate() == nil {
		t.Error("invalid specs validated")
	}
}
