package raftstore

// DefaultTrailingBytes is TrailingBound.Bytes's default: about the bytes
// of one raft-wal segment (DefaultWALSegmentBytes), so with the WAL the
// entries kept after a snapshot add at most a segment or two on disk.
const DefaultTrailingBytes = 64 << 20

// MinTrailingLogs is the fewest entries kept after a snapshot whatever
// their size (unless TrailingBound.Logs is lower), so a follower a few
// calls behind still catches up from the log rather than a snapshot.
const MinTrailingLogs = 16

// trailingSample is how many entries since the last snapshot the average
// entry size needs before it is trusted, unless they already hold
// TrailingBound.Bytes: a snapshot by size may come after a few dozen
// large entries.
const trailingSample = 32

// TrailingBound bounds in bytes the entries Raft keeps after each
// snapshot (its TrailingLogs) for followers that lag a little. A count
// alone does not bound the disk: 512 entries of 5,000 records of 1 KiB
// are 2.5 GB of log (docs/performance.md, "Snapshot triggers with the
// WAL"). Raft reloads TrailingLogs at run time and reads it at each log
// compaction, so its user sets it to what Next says as entries are
// applied.
type TrailingBound struct {
	// Logs is the most entries kept: Raft's configured TrailingLogs.
	Logs uint64
	// Bytes is about the most bytes of entries kept, at the average size
	// of the entries since the last snapshot; at least MinTrailingLogs
	// entries stay (or Logs, if fewer). Zero: DefaultTrailingBytes;
	// negative: Logs alone.
	Bytes int64
}

// Next returns the TrailingLogs that keeps b's bytes at the average size
// of the entries appended since the last snapshot (entries of bytes in
// all), and whether Raft's current setting cur should change to it: not
// while too few entries were appended to trust their average, nor for a
// change of a quarter or less unless it reaches a bound.
func (b TrailingBound) Next(cur, entries uint64, bytes int64) (uint64, bool) {
	budget := b.Bytes
	if budget == 0 {
		budget = DefaultTrailingBytes
	}
	if entries == 0 || entries < trailingSample && bytes < budget {
		return cur, false
	}
	want := trailingLogsFor(bytes, entries, budget, b.Logs)
	return want, trailingChanged(cur, want, b.Logs)
}

// trailingLogsFor returns how many entries of the average size
// bytes/entries fit in budget, within [min(MinTrailingLogs, most), most].
// A negative budget, or no entries, keeps most.
func trailingLogsFor(bytes int64, entries uint64, budget int64, most uint64) uint64 {
	if budget < 0 || entries == 0 || bytes <= 0 {
		return most
	}
	avg := max(uint64(bytes)/entries, 1)
	n := uint64(budget) / avg
	return min(max(n, min(MinTrailingLogs, most)), most)
}

// trailingChanged reports whether want differs enough from cur to reload:
// by more than a quarter, or reaching a bound (most, or the minimum).
func trailingChanged(cur, want, most uint64) bool {
	if cur == want {
		return false
	}
	if want == most || want <= MinTrailingLogs {
		return true
	}
	lo, hi := min(cur, want), max(cur, want)
	return hi-lo > hi/4
}
