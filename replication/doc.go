// Package replication runs logd's state machine on hashicorp/raft.
//
// One Raft group per cluster (a single node by default). Raft's log and
// stable store live in raft-boltdb (bbolt) under <data>/raft; the FSM's
// state is the set of topics and their partition logs under <data>/topics.
//
// Commands are a type byte, a version byte, the leader-stamped time (Unix
// nanoseconds) and a payload; each type has its own applyX in its own file.
// An entry this build cannot decode stops the node (Config.Fatal) rather
// than let replicas diverge.
//
// Invariants, each with a test:
//
//  1. A write is acknowledged only after its entry is committed (fsynced in
//     the Raft log store by a quorum) and applied: Node.Append waits for the
//     ApplyFuture, which completes after FSM.ApplyBatch returns.
//  2. Apply is deterministic: time comes only from the command and is kept
//     monotonic by the FSM; segment rolls by age use that time; nothing in
//     Apply reads a clock, randomness or map order (TestApplyDeterministic).
//  3. Apply is idempotent by Raft index: each partition log stores the Raft
//     index of its last append inside its data (see package log), and an
//     append at or below it is skipped on replay (TestReplayIsIdempotent).
//     An Append names each partition at most once, so "at or below" is
//     exact.
//  4. Snapshots are small: topic metadata and a per-partition manifest
//     (start, end, applied index, segments). Snapshot captures it on the
//     FSM goroutine; Persist fsyncs every partition log before writing it
//     (while applies go on), so Raft never compacts its log past partition
//     data that is not durable. Restore
//     reopens the local logs; where a snapshot is ahead of them (a new or
//     long-offline follower) it copies the missing segments byte for byte
//     from a peer in the snapshot's node registry, checking every batch's
//     CRC, and swaps them in (install.go; TestRestoreFetchesMissingSegments).
//  5. An I/O error inside Apply stops the node: Config.Fatal (by default
//     the process exits with status 70) runs before the result could be
//     acknowledged, and the FSM refuses every later entry (TestUnknownCommandStops shows the same path).
//
// Partition logs are not fsynced per append by default: the Raft log is the
// write-ahead log. After a power cut a partition's unsynced tail is cut at
// the last whole batch by log recovery, and Raft's replay of entries after
// the last snapshot re-appends exactly what is missing (by invariant 3).
// Config.SyncPartitions fsyncs them on every append as well.
//
// Membership (cluster.go): a node joins as a non-voter and is promoted to
// voter once caught up; changes run one at a time on the leader. Each node's
// client API address is replicated state (commands 60-61, in snapshots), so
// any node can forward writes to the leader and fetch segments from peers.
// A node whose disk fails in Apply stops (invariant 5); a node whose data
// is wiped must rejoin under a new id (its old id's Raft log position is
// gone, and reusing the id could let it vote for entries it no longer has).
//
// Topic directories are named "<name>~<create index>", so the files of a
// deleted topic are never mistaken for a later topic of the same name.
package replication
