// Package cleaner is the leader's retention and compaction scheduler.
// Every Options.Interval the leader plans, for each partition, with its
// own clock and the pure planner of package retention, a trim of the
// segments that expired and a compaction where one is due; it proposes
// each decision as a command (fsm.CmdTrim, fsm.CmdCompact) and every
// replica applies it (docs/architecture.md, "The state machine").
//
// The package sees the node through two interfaces it declares: Node
// (whether it leads, the proposal of an encoded command) and State (the
// applied topics, what queue groups protect, the prepared compactions'
// hand-over and the retired files, which *fsm.FSM implements). Package
// replication implements Node over its node and starts and stops Run with
// the node's lifecycle; this package imports neither Raft nor package
// replication.
//
// # Invariants
//
//   - The cleaner's decisions are commands, so every replica holds the
//     same bytes: a trim names the offset below which segments go, a
//     compaction the range, the tombstone horizon, the source segments
//     and the checksum of its output. Apply decides with what the entry
//     carries, never with the replica's own clock.
//   - Time enters once: a partition's plan and the commands it leads to
//     are stamped with the same reading of Options.Now.
//   - Nothing a queue group has not finished is planned away
//     (State.ProtectedFrom), and Apply clamps a trim with it again.
//   - The expensive part of a compaction, reading the segments and
//     writing the compacted output, runs here, beside the live segments
//     and bounded by Options.IOBytesPerSec; the prepared result is
//     offered to the apply of its command (State.OfferCompaction), which
//     only swaps the files in. A replica without it (a follower) compacts
//     the same range itself; an output whose checksum differs stops that
//     replica (backend.ErrDiverged) rather than let it diverge.
//   - On every node, leader or not, Run closes the segment files applied
//     trims and compactions retired, off the apply path.
//   - No package-level state: each node (each Raft group) has its own
//     Cleaner, with its own Stats.
//
// # Caveats
//
//   - A pass runs partition after partition; a pass in progress when Run's
//     context ends finishes its current partition first.
//   - A prepared compaction whose log changed in the meantime is dropped
//     (log.ErrCompactionStale); the next pass plans again.
//   - Stats are this node's: a new leader starts counting from its own.
package cleaner
