package replication

import "github.com/logd-dev/logd/replication/raftstore"

// boundTrailingLogs bounds in bytes the entries Raft keeps after each
// snapshot for followers that lag a little (raftstore.TrailingBound): it
// sets Raft's TrailingLogs, a setting Raft reloads at run time and reads
// at each log compaction, to what TrailingBytes holds at the average size
// of the entries applied since the last snapshot, when that is far enough
// from the current value. It runs on the housekeeping goroutine, the only
// one that changes Raft's reloadable settings.
func (n *Node) boundTrailingLogs() {
	entries, bytes := n.fsm.SinceSnapshot()
	rc := n.raft.ReloadableConfig()
	bound := raftstore.TrailingBound{Logs: n.cfg.TrailingLogs, Bytes: n.cfg.TrailingBytes}
	want, change := bound.Next(rc.TrailingLogs, entries, bytes)
	if !change {
		return
	}
	rc.TrailingLogs = want
	if err := n.raft.ReloadConfig(rc); err != nil {
		n.cfg.Logger.Warn("set raft trailing logs", "trailing_logs", want, "err", err)
		return
	}
	n.cfg.Logger.Debug("raft trailing logs bounded in bytes", "trailing_logs", want, "entries_since_snapshot", entries, "bytes_since_snapshot", bytes)
}
