package server

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logd-dev/logd/backend"
)

// moveMetricsBackend is a node whose table marks moves, on a fixed clock.
type moveMetricsBackend struct {
	backend.API
	now    time.Time
	groups []backend.DataGroupStatus
}

func (b moveMetricsBackend) Status() backend.Status {
	return backend.Status{State: "Follower", DataGroups: b.groups}
}
func (b moveMetricsBackend) Failed() error                     { return nil }
func (b moveMetricsBackend) TopicStates() []backend.TopicState { return nil }
func (b moveMetricsBackend) Now() time.Time                    { return b.now }

// TestMoveMetrics: every node reports the moves its table marks and the
// age of the oldest, whether or not it holds a replica of the groups; 0
// and 0 without moves.
func TestMoveMetrics(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	move := func(age time.Duration) *backend.ReplicaMove {
		return &backend.ReplicaMove{Added: []string{"n4"}, Reason: "balance", Since: now.Add(-age)}
	}
	tests := []struct {
		name          string
		groups        []backend.DataGroupStatus
		moves, oldest float64
	}{
		{name: "no data groups"},
		{name: "no moves", groups: []backend.DataGroupStatus{{ID: 1, State: "Leader"}, {ID: 2}}},
		{name: "moves", groups: []backend.DataGroupStatus{{ID: 1, State: "Leader", Move: move(90 * time.Second)}, {ID: 2}, {ID: 3, Move: move(1500 * time.Millisecond)}},
			moves: 2, oldest: 90},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			reg.MustRegister(&stateCollector{b: moveMetricsBackend{now: now, groups: tt.groups}})
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]float64{}
			for _, mf := range mfs {
				for _, m := range mf.GetMetric() {
					got[mf.GetName()] = m.GetGauge().GetValue()
				}
			}
			for name, want := range map[string]float64{"logd_data_group_moves": tt.moves, "logd_data_group_move_oldest_seconds": tt.oldest} {
				if v, ok := got[name]; !ok || v != want {
					t.Errorf("%s = %v (reported: %v), want %v", name, v, ok, want)
				}
			}
		})
	}
}
