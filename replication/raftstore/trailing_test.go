package raftstore

import "testing"

func TestTrailingLogsFor(t *testing.T) {
	for _, c := range []struct {
		bytes   int64
		entries uint64
		budget  int64
		most    uint64
		want    uint64
	}{
		{bytes: 128 * 1000, entries: 1000, budget: 64 << 20, most: 512, want: 512},       // small entries: the count rules
		{bytes: 5_000_000 * 40, entries: 40, budget: 64 << 20, most: 512, want: 16},      // 5 MB calls: at least MinTrailingLogs
		{bytes: 1 << 30, entries: 4096, budget: 64 << 20, most: 512, want: 256},          // 256 KiB entries
		{bytes: 1 << 30, entries: 4096, budget: -1, most: 512, want: 512},                // bytes bound off
		{bytes: 0, entries: 100, budget: 64 << 20, most: 512, want: 512},                 // no appends since
		{bytes: 5_000_000 * 40, entries: 40, budget: 64 << 20, most: 8, want: 8},         // a count below the minimum stays
		{bytes: 1 << 40, entries: 1, budget: 64 << 20, most: 512, want: MinTrailingLogs}, // one huge entry
	} {
		if got := trailingLogsFor(c.bytes, c.entries, c.budget, c.most); got != c.want {
			t.Errorf("trailingLogsFor(%d, %d, %d, %d) = %d, want %d", c.bytes, c.entries, c.budget, c.most, got, c.want)
		}
	}
	for _, c := range []struct {
		cur, want uint64
		changed   bool
	}{{512, 512, false}, {512, 480, false}, {512, 300, true}, {300, 512, true}, {20, 16, true}, {100, 90, false}} {
		if got := trailingChanged(c.cur, c.want, 512); got != c.changed {
			t.Errorf("trailingChanged(%d, %d) = %v, want %v", c.cur, c.want, got, c.changed)
		}
	}
}

// TestTrailingBoundNext: the bound waits for enough entries to trust
// their average (unless they already hold the budget), and a change
// within a quarter of the current setting is no change.
func TestTrailingBoundNext(t *testing.T) {
	for _, tc := range []struct {
		name    string
		bound   TrailingBound
		cur     uint64
		entries uint64
		bytes   int64
		want    uint64
		change  bool
	}{
		{name: "nothing since the snapshot", bound: TrailingBound{Logs: 512}, cur: 512, want: 512},
		{name: "too few entries to trust", bound: TrailingBound{Logs: 512}, cur: 512, entries: trailingSample - 1, bytes: 1 << 20, want: 512},
		{name: "few entries holding the budget", bound: TrailingBound{Logs: 512, Bytes: 1 << 20}, cur: 512, entries: 4, bytes: 4 << 20, want: MinTrailingLogs, change: true},
		{name: "large entries, zero bytes is the default", bound: TrailingBound{Logs: 512}, cur: 512, entries: 64, bytes: 64 << 20, want: 64, change: true},
		{name: "small entries keep the count", bound: TrailingBound{Logs: 512}, cur: 512, entries: 1000, bytes: 128 * 1000, want: 512},
		{name: "back to the count", bound: TrailingBound{Logs: 512}, cur: 16, entries: 1000, bytes: 128 * 1000, want: 512, change: true},
		{name: "within a quarter", bound: TrailingBound{Logs: 512, Bytes: 300 << 10}, cur: 256, entries: 100, bytes: 100 << 10, want: 300},
		{name: "count alone", bound: TrailingBound{Logs: 512, Bytes: -1}, cur: 16, entries: 64, bytes: 1 << 30, want: 512, change: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, change := tc.bound.Next(tc.cur, tc.entries, tc.bytes)
			if change != tc.change || change && got != tc.want {
				t.Fatalf("Next(%d, %d, %d) = %d, %v; want %d, %v", tc.cur, tc.entries, tc.bytes, got, change, tc.want, tc.change)
			}
		})
	}
}
