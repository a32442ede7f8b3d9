package main

import (
	"testing"
	"time"
)

// TestConfigValueText: tables show a setting's value as --config takes it,
// and durations and sizes in human units beside it.
func TestConfigValueText(t *testing.T) {
	tests := []struct {
		key, value, want string
	}{
		{key: "retention.ms", value: "604800000", want: "604800000 (7d)"},
		{key: "retention.ms", value: "90061500", want: "90061500 (1d1h1m1.5s)"},
		{key: "segment.ms", value: "5400000", want: "5400000 (1h30m)"},
		{key: "idempotency.window.ms", value: "3600000", want: "3600000 (1h)"},
		{key: "queue.max.backlog.age.ms", value: "1500", want: "1500 (1.5s)"},
		{key: "min.compaction.lag.ms", value: "999", want: "999"},
		{key: "min.compaction.lag.ms", value: "0", want: "0"},
		{key: "retention.ms", value: "-1", want: "-1 (unbounded)"},
		{key: "retention.ms", value: "9223372036854775807", want: "9223372036854775807"},
		{key: "segment.bytes", value: "1073741824", want: "1073741824 (1.0 GiB)"},
		{key: "max.message.bytes", value: "1048588", want: "1048588 (1.0 MiB)"},
		{key: "segment.bytes", value: "1023", want: "1023"},
		{key: "retention.bytes", value: "-1", want: "-1 (unbounded)"},
		{key: "queue.max.backlog.records", value: "-1", want: "-1 (unbounded)"},
		{key: "queue.max.backlog.records", value: "5000", want: "5000"},
		{key: "cleanup.policy", value: "compact", want: "compact"},
		{key: "min.cleanable.dirty.ratio", value: "0.5", want: "0.5"},
		{key: "retention.ms", value: "soon", want: "soon"},
	}
	for _, tt := range tests {
		if got := configValueText(tt.key, tt.value); got != tt.want {
			t.Errorf("configValueText(%q, %q) = %q, want %q", tt.key, tt.value, got, tt.want)
		}
	}
}

// TestHumanDuration: days, and no zero units.
func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                                    "0s",
		250 * time.Millisecond:               "250ms",
		30 * time.Second:                     "30s",
		5 * time.Minute:                      "5m",
		90 * time.Minute:                     "1h30m",
		2 * time.Hour:                        "2h",
		7 * 24 * time.Hour:                   "7d",
		26*time.Hour + 30*time.Second:        "1d2h0m30s",
		24*time.Hour + 1500*time.Millisecond: "1d1.5s",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
