// Package retention decides what a partition may lose: pure planning
// functions from a segment list, a topic's policy and a time to "delete the
// closed segments below offset O" and "compact the closed segments below
// offset O with tombstone horizon H". It reads no clock and does no I/O; the
// replication layer runs it on the leader and turns its answers into Raft
// commands, so every replica deletes and rewrites exactly the same bytes.
//
// # Deletion (cleanup.policy delete)
//
// Only whole closed segments go, oldest first, and only while every older
// one goes too (the log keeps a contiguous range). A closed segment is
// deletable when either
//
//   - retention.ms >= 0 and now - its largest timestamp > retention.ms
//     (strictly: a segment exactly retention.ms old stays), or
//   - retention.bytes >= 0 and the partition (active segment included)
//     would still hold at least retention.bytes without it, as in Kafka.
//
// The active segment is never deleted; a partition that receives no appends
// keeps its last segment however old (segment.ms rolls on append, as in
// Kafka). Replay consumer groups are not consulted, as in Kafka: a group
// whose committed offset falls below the new log start follows its reset
// policy.
//
// # Compaction (cleanup.policy compact)
//
// The cleaning point is the end of the longest prefix of closed segments
// whose records are all at least min.compaction.lag.ms old (now - largest
// timestamp >= lag). A pass rewrites every closed segment below it, so it
// is planned only when it is worth it:
//
//   - the dirty ratio reaches min.cleanable.dirty.ratio (default 0.5, as in
//     Kafka): of the bytes below the cleaning point, those in segments never
//     compacted (written since the last pass) over all of them; or
//   - a compacted segment holds a tombstone older than the tombstone
//     horizon, now - delete.retention.ms (one the next pass would drop), so
//     deletes still go on time.
//
// The ratio keeps the work of a pass proportional to the writes: without
// it, every pass would rewrite the whole compacted history to clean a
// little new data, so the work per pass would grow with the topic. With it,
// a pass rewrites at most about 1/ratio times the new data. The "cleaned
// up to" offset is not separate state: it is the end of the compacted
// prefix of the log, read from the segments' compacted flag (in each
// segment's .meta, written identically by every replica's Compact command
// and copied with the segments in a snapshot install), so it cannot
// disagree with the log. Tombstones are timed by their record timestamp.
// "compact,delete" does both, deletion first.
//
// # Queue groups: the protected offset
//
// Input.ProtectedFrom is the lowest offset that some consumer still needs
// and that neither deletion nor compaction may remove: nothing at or above it
// is deleted, and the cleaning point never passes it. The replicated state
// machine supplies it per partition: the lowest start offset of the topic's
// queue groups (below a group's start offset every record is acked or
// dead-lettered), or NoProtection (unbounded) when the topic has none. It
// applies the limit again when a trim or compaction command is applied, so
// a plan made before the protection moved (a queue group created since,
// say) cannot remove what it now protects.
//
// # Why the heavy work stays off the FSM goroutine
//
// Apply must be deterministic and every replica must do the same work; a
// compaction done inside Apply would stall the FSM, and with it every
// produce, for as long as the rewrite takes. So compaction is two-phase
// (package log: PrepareCompaction, CommitCompaction): the leader's cleaner
// goroutine prepares the compacted segments beside the live ones (reading
// only closed segments, while appends go on), then proposes a command that
// carries the plan (partition, cleaning point, tombstone horizon), the exact
// source segments and the output checksum. Applying it only swaps the
// prepared files in (renames and fsyncs). A replica without a prepared
// result (a follower, or a node replaying after restart) prepares it inside
// Apply — same inputs, same bytes — and stops if its checksum differs from
// the leader's (divergence). A command whose sources no longer match the
// log (already applied before a restart, or a segment deleted meanwhile)
// changes nothing, which makes it idempotent by content rather than by raft
// index. So a follower does stall its own apply for the rewrite; a
// "prepare" hint command that let followers prebuild would need no change
// of format.
package retention
