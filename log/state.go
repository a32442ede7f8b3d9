package log

import (
	"math"
	"sort"
)

// segView is an immutable snapshot of one segment's extent.
type segView struct {
	seg     *segment
	size    int64  // bytes of whole, acknowledged batches
	end     int64  // offset after the last batch (the base offset if empty)
	maxTs   int64  // largest batch maxTimestamp; MinInt64 if empty
	applied uint64 // applied index of the last batch; the base one if empty
}

func (v *segView) info(closed bool) SegmentInfo {
	ts := int64(math.MaxInt64)
	if v.seg.meta.compacted {
		ts = v.seg.meta.tombstoneTs
	}
	return SegmentInfo{
		BaseOffset:      v.seg.base(),
		EndOffset:       v.end,
		Bytes:           v.size,
		MaxTimestamp:    v.maxTs,
		Closed:          closed,
		AppliedIndex:    v.applied,
		Compacted:       v.seg.meta.compacted,
		OldestTombstone: ts,
	}
}

// state is the immutable view of the log that readers load atomically. The
// goroutine holding Log.mu publishes a new state after each change; it never
// modifies a published one (closed is copied, not appended in place, when
// segments come or go).
type state struct {
	closed      []segView // closed segments, by base offset
	active      segView   // the segment appends go to; seg is nil if the log has none yet
	closedBytes int64
	shut        bool // the log is closed
}

func (s *state) n() int {
	if s.active.seg == nil {
		return 0
	}
	return len(s.closed) + 1
}

func (s *state) at(i int) *segView {
	if i < len(s.closed) {
		return &s.closed[i]
	}
	return &s.active
}

func (s *state) start() int64 {
	if s.n() == 0 {
		return 0
	}
	return s.at(0).seg.base()
}

func (s *state) end() int64 {
	if s.active.seg == nil {
		return 0
	}
	return s.active.end
}

func (s *state) applied() uint64 {
	if s.active.seg == nil {
		return 0
	}
	return s.active.applied
}

// find returns the index of the segment holding offset, which must be in
// [start, end).
func (s *state) find(offset int64) int {
	return sort.Search(s.n(), func(i int) bool { return s.at(i).end > offset })
}

// SegmentInfo describes one segment. Segments returns immutable copies.
type SegmentInfo struct {
	BaseOffset   int64  // offset of the segment's first batch
	EndOffset    int64  // offset after its last batch
	Bytes        int64  // size of its data file
	MaxTimestamp int64  // largest batch maxTimestamp; math.MinInt64 if empty
	Closed       bool   // false only for the active segment
	AppliedIndex uint64 // applied index of its last batch (its base applied index if empty)
	// Compacted reports a segment written by compaction (see Compact).
	Compacted bool
	// OldestTombstone is the smallest timestamp (ms) of a tombstone that
	// compaction kept in the segment, math.MaxInt64 if none (or if the
	// segment was never compacted): a planner can tell when a new pass
	// would drop it.
	OldestTombstone int64
}
