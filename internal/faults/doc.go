// Package faults holds the faults a fault build of logd injects into its
// own process, for the end-to-end tests of docs/faults.md that a signal
// cannot cause: a power cut, a slow disk and a clock that is off.
//
// Only cmd/logd's files built with -tags faults import it, so the default
// binary holds none of it; they read the LOGD_FAULT_* environment
// (FromEnv) and wrap the node's stores and clock:
//
//   - PowerCutFS wraps the partition logs' file system (log.FS) and
//     records, in a journal beside the data, which bytes and which
//     directory entries were made durable (Sync, SyncDir). Opening it
//     again after the process died cuts every file back to its durable
//     bytes and removes files whose creation was never made durable: a
//     SIGKILL followed by a restart is then a power cut, as far as the
//     partition logs can tell.
//   - SlowFS adds latency to every file and directory sync of the
//     partition logs, and LogStore and StableStore to every write of
//     Raft's log and stable store (raft-boltdb commits with an fsync, so a
//     write there stands for one).
//   - LogStore can also hold Raft's log entries in memory and write them
//     back only every so often (WriteBack), as the kernel would with the
//     Raft log's fsync switched off: a SIGKILL then loses the entries of
//     the last interval. This is the control a power-cut test runs to show
//     that its checker finds a loss when the protection is off.
//
// Limits of the power-cut model: removals and renames are durable at once
// (a power cut never brings back a removed or renamed-away name); the
// bytes of a file are cut to exactly its last sync (a real disk may keep
// some of the rest); only files written through PowerCutFS are tracked
// (topic directories, which the state machine creates and removes itself,
// and Raft's files are not); the journal grows by a line per sync until
// the next start. Raft's snapshot store and raft-boltdb fsync every write
// themselves, so a power cut costs them nothing and they are not modelled,
// unless WriteBack switches that protection off. raft-wal's segment files,
// where Raft's log is kept by default, are: WALPowerCut wraps its file
// system seam and cuts them back to their synced writes the same way.
package faults
