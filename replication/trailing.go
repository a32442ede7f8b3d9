package replication

// DefaultTrailingBytes is Config.TrailingBytes's default: about the bytes
// of one raft-wal segment (DefaultWALSegmentBytes), so with the WAL the
// entries kept after a snapshot add at most a segment or two on disk.
const DefaultTrailingBytes = 64 << 20

// minTrailingLogs is the fewest entries kept after a snapshot whatever
// their size (unless TrailingLogs is lower), so a follower a few calls
// behind still catches up from the log rather than a snapshot.
const minTrailingLogs = 16

// trailingSample is how many entries since the last snapshot the average
// entry size needs before it is trusted, unless they already hold
// TrailingBytes: a snapshot by size may come after a few dozen large
// entries.
const trailingSample = 32

// trailingLogsFor returns how many entries of the average size
// bytes/entries fit in budget, within [min(minTrailingLogs, most), most].
// A negative budget, or no entries, keeps most.
func trailingLogsFor(bytes int64, entries uint64, budget int64, most uint64) uint64 {
	if budget < 0 || entries == 0 || bytes <= 0 {
		return most
	}
	avg := max(uint64(bytes)/entries, 1)
	n := uint64(budget) / avg
	return min(max(n, min(minTrailingLogs, most)), most)
}

// boundTrailingLogs bounds in bytes the entries Raft keeps after each
// snapshot (TrailingLogs) for followers that lag a little. A count alone
// does not bound the disk: 512 entries of 5,000 records of 1 KiB are
// 2.5 GB of log (docs/performance.md). So it sets Raft's TrailingLogs, a
// setting Raft reloads at run time and reads at each log compaction, to
// what TrailingBytes holds at the average size of the entries applied
// since the last snapshot, when that is more than a quarter away from the
// current value (or at a bound). It runs on the housekeeping goroutine,
// the only one that changes Raft's reloadable settings.
func (n *Node) boundTrailingLogs() {
	entries, bytes := n.fsm.EntriesSinceSnapshot(), n.fsm.BytesSinceSnapshot()
	if entries == 0 || entries < trailingSample && bytes < n.cfg.TrailingBytes {
		return
	}
	want := trailingLogsFor(bytes, entries, n.cfg.TrailingBytes, n.cfg.TrailingLogs)
	rc := n.raft.ReloadableConfig()
	if !trailingChanged(rc.TrailingLogs, want, n.cfg.TrailingLogs) {
		return
	}
	rc.TrailingLogs = want
	if err := n.raft.ReloadConfig(rc); err != nil {
		n.cfg.Logger.Warn("set raft trailing logs", "trailing_logs", want, "err", err)
		return
	}
	n.cfg.Logger.Debug("raft trailing logs bounded in bytes", "trailing_logs", want, "entries_since_snapshot", entries, "bytes_since_snapshot", bytes)
}

// trailingChanged reports whether want differs enough from cur to reload:
// by more than a quarter, or reaching a bound (most, or the minimum).
func trailingChanged(cur, want, most uint64) bool {
	if cur == want {
		return false
	}
	if want == most || want <= minTrailingLogs {
		return true
	}
	lo, hi := min(cur, want), max(cur, want)
	return hi-lo > hi/4
}

// trailingLogs is how many entries Raft currently keeps after a snapshot
// (Config.TrailingLogs, lowered by Config.TrailingBytes).
func (n *Node) trailingLogs() uint64 { return n.raft.ReloadableConfig().TrailingLogs }
