package retention

import "math"

// NoProtection is Input.ProtectedFrom when no consumer protects any record.
const NoProtection = math.MaxInt64

// Policy is a topic's retention and compaction settings, in Kafka's terms.
type Policy struct {
	// Delete and Compact are the cleanup.policy flags.
	Delete, Compact bool
	// RetentionMs is retention.ms; -1 keeps records forever.
	RetentionMs int64
	// RetentionBytes is retention.bytes, per partition; -1 is unbounded.
	RetentionBytes int64
	// DeleteRetentionMs is delete.retention.ms: how long compaction keeps a
	// tombstone after its timestamp.
	DeleteRetentionMs int64
	// MinCompactionLagMs is min.compaction.lag.ms: a record stays
	// uncompacted at least this long after its timestamp.
	MinCompactionLagMs int64
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio: compact only
	// when the dirty bytes (never compacted) are at least this share of
	// the cleanable bytes (see the package documentation).
	MinCleanableDirtyRatio float64
}

// Segment describes one segment of a partition log.
type Segment struct {
	Base, End    int64 // offsets [Base, End)
	Bytes        int64
	MaxTimestamp int64 // ms; math.MinInt64 for an empty segment
	Closed       bool  // false for the active (last) segment
	Compacted    bool  // written by compaction
	// OldestTombstone is the smallest timestamp (ms) of a tombstone kept by
	// the last compaction, math.MaxInt64 if none.
	OldestTombstone int64
}

// Input is what a plan is made from.
type Input struct {
	Segments []Segment // oldest first; the last one is the active segment
	Policy   Policy
	NowMs    int64 // the planning time, Unix milliseconds
	// ProtectedFrom: nothing at or above this offset may be deleted or
	// compacted away (see the package documentation). NoProtection when
	// unbounded.
	ProtectedFrom int64
}

// Trim returns the offset below which whole closed segments may be deleted
// (the end of the last deletable one), and false if none may.
func Trim(in Input) (below int64, ok bool) {
	if !in.Policy.Delete {
		return 0, false
	}
	var total int64
	for _, s := range in.Segments {
		total += s.Bytes
	}
	p := in.Policy
	for _, s := range in.Segments {
		if !s.Closed || s.End > in.ProtectedFrom {
			break
		}
		byTime := p.RetentionMs >= 0 && age(in.NowMs, s) > p.RetentionMs
		bySize := p.RetentionBytes >= 0 && total-s.Bytes >= p.RetentionBytes
		if !byTime && !bySize {
			break
		}
		total -= s.Bytes
		below, ok = s.End, true
	}
	return below, ok
}

// Compaction returns the cleaning point and the tombstone horizon (ms) of a
// compaction pass, and false if none is due.
func Compaction(in Input) (below, horizon int64, ok bool) {
	if !in.Policy.Compact {
		return 0, 0, false
	}
	horizon = satSub(in.NowMs, in.Policy.DeleteRetentionMs)
	var clean, dirty int64
	expired, hasDirty := false, false
	for _, s := range in.Segments {
		if !s.Closed || s.End > in.ProtectedFrom || age(in.NowMs, s) < in.Policy.MinCompactionLagMs {
			break
		}
		below = s.End
		if s.Compacted {
			clean += s.Bytes
			expired = expired || s.OldestTombstone < horizon
		} else {
			dirty += s.Bytes
			hasDirty = true
		}
	}
	return below, horizon, expired || (hasDirty && dirtyEnough(clean, dirty, in.Policy.MinCleanableDirtyRatio))
}

// dirtyEnough reports whether dirty/(clean+dirty) >= ratio, the
// min.cleanable.dirty.ratio test (0/0 counts as dirty enough).
func dirtyEnough(clean, dirty int64, ratio float64) bool {
	// In floats: byte counts are far below 2^53.
	return float64(dirty) >= ratio*float64(clean+dirty)
}

// age is how old the newest record of s is at now (ms); an empty segment is
// infinitely old.
func age(now int64, s Segment) int64 {
	if s.MaxTimestamp == math.MinInt64 {
		return math.MaxInt64
	}
	return satSub(now, s.MaxTimestamp)
}

// satSub is a-b, saturating instead of overflowing.
func satSub(a, b int64) int64 {
	d := a - b
	if (b > 0 && d > a) || (b < 0 && d < a) {
		if b > 0 {
			return math.MinInt64
		}
		return math.MaxInt64
	}
	return d
}
