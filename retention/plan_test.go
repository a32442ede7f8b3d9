package retention

import (
	"math"
	"testing"
)

// segs builds closed segments of the given sizes and max timestamps, with an
// active segment of activeBytes at the end.
func segs(sizes, ts []int64, activeBytes int64) []Segment {
	var out []Segment
	off := int64(0)
	for i := range sizes {
		out = append(out, Segment{Base: off, End: off + 10, Bytes: sizes[i], MaxTimestamp: ts[i], Closed: true, OldestTombstone: math.MaxInt64})
		off += 10
	}
	return append(out, Segment{Base: off, End: off + 1, Bytes: activeBytes, MaxTimestamp: math.MaxInt64 / 2, OldestTombstone: math.MaxInt64})
}

func TestTrim(t *testing.T) {
	del := Policy{Delete: true, RetentionMs: 1000, RetentionBytes: -1}
	tests := []struct {
		name   string
		in     Input
		below  int64
		wantOK bool
	}{
		{name: "compact only never deletes", in: Input{Segments: segs([]int64{1}, []int64{0}, 1), Policy: Policy{Compact: true, RetentionMs: 0, RetentionBytes: 0}, NowMs: 1e9, ProtectedFrom: NoProtection}},
		{name: "exactly retention.ms old stays", in: Input{Segments: segs([]int64{1, 1}, []int64{0, 500}, 1), Policy: del, NowMs: 1000, ProtectedFrom: NoProtection}},
		{name: "one ms older goes", in: Input{Segments: segs([]int64{1, 1}, []int64{0, 500}, 1), Policy: del, NowMs: 1001, ProtectedFrom: NoProtection}, below: 10, wantOK: true},
		{name: "both expired", in: Input{Segments: segs([]int64{1, 1}, []int64{0, 500}, 1), Policy: del, NowMs: 1501, ProtectedFrom: NoProtection}, below: 20, wantOK: true},
		{name: "a prefix only: a newer segment blocks older-looking ones", in: Input{Segments: segs([]int64{1, 1, 1}, []int64{0, 5000, 0}, 1), Policy: del, NowMs: 2000, ProtectedFrom: NoProtection}, below: 10, wantOK: true},
		{name: "the active segment is never deleted", in: Input{Segments: segs(nil, nil, 100), Policy: Policy{Delete: true, RetentionMs: 0, RetentionBytes: 0}, NowMs: math.MaxInt64, ProtectedFrom: NoProtection}},
		{name: "retention.ms -1 keeps forever", in: Input{Segments: segs([]int64{1}, []int64{0}, 1), Policy: Policy{Delete: true, RetentionMs: -1, RetentionBytes: -1}, NowMs: math.MaxInt64, ProtectedFrom: NoProtection}},
		// 100+100+100 closed + 50 active = 350.
		{name: "size: total minus segment exactly retention.bytes goes", in: Input{Segments: segs([]int64{100, 100, 100}, []int64{0, 0, 0}, 50), Policy: Policy{Delete: true, RetentionMs: -1, RetentionBytes: 250}, ProtectedFrom: NoProtection}, below: 10, wantOK: true},
		{name: "size: one byte short stays", in: Input{Segments: segs([]int64{100, 100, 100}, []int64{0, 0, 0}, 50), Policy: Policy{Delete: true, RetentionMs: -1, RetentionBytes: 251}, ProtectedFrom: NoProtection}},
		{name: "size: several", in: Input{Segments: segs([]int64{100, 100, 100}, []int64{0, 0, 0}, 50), Policy: Policy{Delete: true, RetentionMs: -1, RetentionBytes: 150}, ProtectedFrom: NoProtection}, below: 20, wantOK: true},
		{name: "size: 0 deletes every closed segment", in: Input{Segments: segs([]int64{100, 100, 100}, []int64{0, 0, 0}, 50), Policy: Policy{Delete: true, RetentionMs: -1, RetentionBytes: 0}, ProtectedFrom: NoProtection}, below: 30, wantOK: true},
		{name: "time or size", in: Input{Segments: segs([]int64{100, 100, 100}, []int64{0, 5000, 5000}, 50), Policy: Policy{Delete: true, RetentionMs: 1000, RetentionBytes: 150}, NowMs: 2000, ProtectedFrom: NoProtection}, below: 20, wantOK: true},
		{name: "protected offset stops deletion", in: Input{Segments: segs([]int64{1, 1, 1}, []int64{0, 0, 0}, 1), Policy: del, NowMs: 5000, ProtectedFrom: 19}, below: 10, wantOK: true},
		{name: "protected at a segment end allows it", in: Input{Segments: segs([]int64{1, 1, 1}, []int64{0, 0, 0}, 1), Policy: del, NowMs: 5000, ProtectedFrom: 20}, below: 20, wantOK: true},
		{name: "protected from the start deletes nothing", in: Input{Segments: segs([]int64{1}, []int64{0}, 1), Policy: del, NowMs: 5000, ProtectedFrom: 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			below, ok := Trim(tc.in)
			if ok != tc.wantOK || below != tc.below {
				t.Fatalf("Trim = %d, %v; want %d, %v", below, ok, tc.below, tc.wantOK)
			}
		})
	}
}

func TestCompaction(t *testing.T) {
	comp := Policy{Compact: true, RetentionMs: -1, RetentionBytes: -1, DeleteRetentionMs: 100, MinCompactionLagMs: 50}
	compacted := func(s []Segment, oldestTombstone ...int64) []Segment {
		for i := range s {
			if s[i].Closed {
				s[i].Compacted = true
			}
		}
		for i, ts := range oldestTombstone {
			s[i].OldestTombstone = ts
		}
		return s
	}
	tests := []struct {
		name    string
		in      Input
		below   int64
		horizon int64
		wantOK  bool
	}{
		{name: "delete only never compacts", in: Input{Segments: segs([]int64{1}, []int64{0}, 1), Policy: Policy{Delete: true}, NowMs: 1000, ProtectedFrom: NoProtection}},
		{name: "nothing closed", in: Input{Segments: segs(nil, nil, 1), Policy: comp, NowMs: 1000, ProtectedFrom: NoProtection}},
		{name: "one ms short of the lag stops the cleaning point", in: Input{Segments: segs([]int64{1, 1}, []int64{0, 951}, 1), Policy: comp, NowMs: 1000, ProtectedFrom: NoProtection}, below: 10, horizon: 900, wantOK: true},
		{name: "lag exactly met is eligible", in: Input{Segments: segs([]int64{1, 1}, []int64{0, 950}, 1), Policy: comp, NowMs: 1000, ProtectedFrom: NoProtection}, below: 20, horizon: 900, wantOK: true},
		{name: "too young", in: Input{Segments: segs([]int64{1}, []int64{951}, 1), Policy: comp, NowMs: 1000, ProtectedFrom: NoProtection}},
		{name: "already compacted, no tombstone", in: Input{Segments: compacted(segs([]int64{1, 1}, []int64{0, 0}, 1)), Policy: comp, NowMs: 1000, ProtectedFrom: NoProtection}, below: 20, horizon: 900},
		{name: "kept tombstone not yet expired", in: Input{Segments: compacted(segs([]int64{1, 1}, []int64{0, 0}, 1), 900), Policy: comp, NowMs: 1000, ProtectedFrom: NoProtection}, below: 20, horizon: 900},
		{name: "kept tombstone expired", in: Input{Segments: compacted(segs([]int64{1, 1}, []int64{0, 0}, 1), 899), Policy: comp, NowMs: 1000, ProtectedFrom: NoProtection}, below: 20, horizon: 900, wantOK: true},
		{name: "a new dirty segment after compacted ones", in: Input{Segments: append(compacted(segs([]int64{1}, []int64{0}, 1))[:1], Segment{Base: 10, End: 20, Closed: true, OldestTombstone: math.MaxInt64}, Segment{Base: 20, End: 21}), Policy: comp, NowMs: 1000, ProtectedFrom: NoProtection}, below: 20, horizon: 900, wantOK: true},
		{name: "protected offset bounds the cleaning point", in: Input{Segments: segs([]int64{1, 1}, []int64{0, 0}, 1), Policy: comp, NowMs: 1000, ProtectedFrom: 15}, below: 10, horizon: 900, wantOK: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			below, horizon, ok := Compaction(tc.in)
			if ok != tc.wantOK || (ok && (below != tc.below || horizon != tc.horizon)) {
				t.Fatalf("Compaction = %d, %d, %v; want %d, %d, %v", below, horizon, ok, tc.below, tc.horizon, tc.wantOK)
			}
		})
	}
}

func TestSatSub(t *testing.T) {
	for _, tc := range []struct{ a, b, want int64 }{
		{5, 3, 2},
		{math.MinInt64 + 1, 5, math.MinInt64},
		{math.MaxInt64, -5, math.MaxInt64},
	} {
		if got := satSub(tc.a, tc.b); got != tc.want {
			t.Errorf("satSub(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestCompactionDirtyRatio: with min.cleanable.dirty.ratio, a pass is due
// only when the never-compacted bytes below the cleaning point are at least
// that share of all of them (exactly the ratio is enough), or when a kept
// tombstone expired.
func TestCompactionDirtyRatio(t *testing.T) {
	pol := Policy{Compact: true, RetentionMs: -1, RetentionBytes: -1, DeleteRetentionMs: 100, MinCleanableDirtyRatio: 0.5}
	// clean returns closed segments of the given sizes, the first nClean
	// compacted, then an active segment.
	clean := func(nClean int, sizes ...int64) []Segment {
		s := segs(sizes, make([]int64, len(sizes)), 1)
		for i := range nClean {
			s[i].Compacted = true
		}
		return s
	}
	tests := []struct {
		name   string
		segs   []Segment
		ratio  float64
		wantOK bool
	}{
		{name: "nothing compacted yet: ratio 1", segs: clean(0, 100, 100), ratio: 0.5, wantOK: true},
		{name: "exactly the ratio", segs: clean(1, 100, 100), ratio: 0.5, wantOK: true},
		{name: "one byte short of the ratio", segs: clean(1, 101, 100), ratio: 0.5},
		{name: "several clean, little dirty", segs: clean(3, 100, 100, 100, 10), ratio: 0.5},
		{name: "ratio 0.01 takes little dirty data", segs: clean(3, 100, 100, 100, 10), ratio: 0.01, wantOK: true},
		{name: "ratio 0 compacts any dirty segment", segs: clean(3, 100, 100, 100, 0), ratio: 0, wantOK: true},
		{name: "ratio 1 waits for no clean data", segs: clean(1, 1, 1000), ratio: 1},
		{name: "all clean is never dirty enough", segs: clean(2, 100, 100), ratio: 0},
		{name: "dirty above the cleaning point does not count", segs: func() []Segment {
			s := clean(1, 100, 100)
			s[1].MaxTimestamp = 1000 // too young: the lag stops the cleaning point before it
			return s
		}(), ratio: 0},
		{name: "an expired tombstone overrides the ratio", segs: func() []Segment {
			s := clean(3, 100, 100, 100, 10)
			s[1].OldestTombstone = 899
			return s
		}(), ratio: 0.5, wantOK: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := pol
			p.MinCleanableDirtyRatio = tc.ratio
			p.MinCompactionLagMs = 50
			below, _, ok := Compaction(Input{Segments: tc.segs, Policy: p, NowMs: 1000, ProtectedFrom: NoProtection})
			if ok != tc.wantOK {
				t.Fatalf("Compaction due = %v (below %d), want %v", ok, below, tc.wantOK)
			}
		})
	}
}
