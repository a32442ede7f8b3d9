package replication

import (
	"log/slog"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/raftstore"
)

// boundTrailingLogs bounds in bytes the entries Raft keeps after each
// snapshot for followers that lag a little (raftstore.TrailingBound): it
// sets Raft's TrailingLogs, a setting Raft reloads at run time and reads
// at each log compaction, to what TrailingBytes holds at the average size
// of the entries applied since the last snapshot, when that is far enough
// from the current value. It runs on the housekeeping goroutine, the only
// one that changes Raft's reloadable settings.
func (n *Node) boundTrailingLogs() {
	boundTrailingLogs(n.raft, n.fsm, n.cfg.snapshotSettings(), n.cfg.Logger)
}

// boundTrailingLogs is Node.boundTrailingLogs for the group Raft r runs
// over state machine f (the meta group, or a data group replica: each
// runs it on its own housekeeping goroutine).
func boundTrailingLogs(r *raft.Raft, f *fsm.FSM, cfg snapshotSettings, logger *slog.Logger) {
	entries, bytes := f.SinceSnapshot()
	rc := r.ReloadableConfig()
	bound := raftstore.TrailingBound{Logs: cfg.trailingLogs, Bytes: cfg.trailingBytes}
	want, change := bound.Next(rc.TrailingLogs, entries, bytes)
	if !change {
		return
	}
	rc.TrailingLogs = want
	if err := r.ReloadConfig(rc); err != nil {
		logger.Warn("set raft trailing logs", "trailing_logs", want, "err", err)
		return
	}
	logger.Debug("raft trailing logs bounded in bytes", "trailing_logs", want, "entries_since_snapshot", entries, "bytes_since_snapshot", bytes)
}
