// Package fsm is logd's replicated state machine: topics and their
// partition logs, topic settings, consumer groups, queue groups, the
// retention bookkeeping, the node registry, the idempotency windows and
// the Kafka producer ids and per-partition producer state (producers.go)
// and the Kafka share groups' settings (share_configs.go), as applied from
// the Raft log. Package replication runs it on hashicorp/raft;
// this package knows nothing of Raft, the network, randomness or the clock
// (see docs/architecture.md for the layout and the import arrows; an
// architecture test keeps them).
//
// Commands are a type byte, a version byte, the leader-stamped time (Unix
// nanoseconds) and a payload. One table (commands.go) holds a row per
// command kind: its type byte, name, the payload versions this build reads,
// the feature level that introduced the kind and each version
// (FeatureLevel), its decoder and its apply
// function, which lives in its own apply_<command>.go. Adding a kind is
// adding a row and a file. Every entry a current build proposes is sealed
// with a CRC-32C (command.go).
//
// Invariants, each with a test:
//
//  1. Apply is deterministic: time comes only from the command and is kept
//     monotonic by the FSM; segment rolls by age use that time; nothing in
//     Apply reads a clock, randomness or map order (TestApplyDeterministic).
//     Config.Now measures durations for logs only.
//  2. Apply is idempotent by Raft index: each partition log stores the Raft
//     index of its last append inside its data (see package log), and an
//     append at or below it is skipped on replay (TestReplayIsIdempotent).
//     An Append names each partition at most once, so "at or below" is
//     exact.
//  3. An entry this build cannot decode (an unknown type or version,
//     backend.ErrUnknownCommand; a malformed payload, backend.ErrBadCommand) or whose seal
//     does not match (backend.ErrEntryDamaged), and an I/O error inside Apply, stop
//     the state machine: Config.Fatal runs before the result could be
//     acknowledged, and every later entry is refused with backend.ErrStopped
//     (TestUnknownCommandStops, TestApplyDamagedEntryStops).
//  4. Snapshots are small: topic metadata and a per-partition manifest
//     (start, end, applied index, segments, live producers), the groups,
//     queues, node registry, cleaner runs, the next producer id and the
//     share groups' settings, then each topic's idempotency window.
//     Snapshot captures it between applies; Snapshot.Persist fsyncs every
//     partition log before writing it (while applies go on), so Raft never
//     compacts its log past partition data that is not durable. Restore
//     reopens the local logs; where a snapshot is ahead of them it plans the
//     missing segments and has its SegmentFetcher copy them from a peer
//     (catchup.go).
//
// Topic directories are named "<name>~<create index>", so the files of a
// deleted topic are never mistaken for a later topic of the same name; a
// topic a data group adopted (CmdPartitionAdopt) is named after the meta
// group's create index.
//
// A state machine runs one data group (Config.Group, 0 by default: the
// meta group, which is also data group 0) and may host only some
// partitions of a topic: those its placement puts in the group
// (placement.go). The others are nil in Topic.Partitions, have no files,
// and every command naming one is refused with a *PartitionElsewhereError
// before anything changes (TestPartitionElsewhereRefusals); see
// docs/architecture.md, "Data groups".
package fsm
