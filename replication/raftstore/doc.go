// Package raftstore opens the stores hashicorp/raft runs on for one Raft
// group, and keeps the wrappers and repairs they need: the log store
// (raft-boltdb or raft-wal), the stable store (raft-boltdb), the snapshot
// store, a cache of the newest entries for Raft's reads of its own log,
// and the bound in bytes of the entries kept after a snapshot. Package
// replication wires them into a node; this package knows nothing of the
// node, its state machine or its transport, and imports no package of
// the module but internal/slogbridge.
//
// # Layout
//
// Options.Dir holds one group's Raft state: raft.db, the stable store
// (current term and vote) in every case, and the log too with
// LogStoreBoltDB; wal/, the log with LogStoreWAL; snapshots/, the latest
// two snapshots. A node keeps it under DATA/raft. Open creates what is
// missing.
//
// # Invariants
//
//   - A directory's log stays in the store it was written in. Open finds
//     which one holds it (the wal/ directory, or entries in raft.db), and
//     refuses Options.LogStore naming the other, or a directory holding
//     both, with ErrLogStoreMismatch, before it changes anything. Only a
//     directory whose log is empty (new, or built by logd restore) takes
//     Options.LogStore, else DefaultLogStore. docs/operations.md ("Raft
//     log store") says how to move a node from one store to the other.
//   - The wal/ directory's entry is fsynced before the WAL writes files in
//     it, since the choice above goes by it.
//   - No package-level mutable state: several groups' stores may be open
//     in one process, each in its own Dir. Open starts no goroutine of its
//     own; raft-wal runs its segment rotation in one, which Close ends.
//     Close the stores after Raft has shut down.
//
// # raft-wal
//
// raft-wal v0.4.1 is required, not v0.4.0: v0.4.0 marks the tail segment
// sealed when Raft deletes a suffix of the log (a follower's entries that
// conflict with a new leader's) without writing its index block, and
// after a restart every read of that segment fails
// (TestWALTailTruncateRestart; docs/performance.md, "Raft log store").
//
// raft-wal seals a full tail segment inside the append that fills it and
// records the seal in its metadata afterwards, from another goroutine. A
// crash between the two leaves a tail sealed on disk but open in the
// metadata, which raft-wal v0.4.1 recovers as the tail and then refuses
// every append to. Before raft-wal opens the WAL, Open finishes such a
// rotation (wal_recover.go): the seal and the next tail are recorded as
// the rotation would have, and nothing committed is dropped.
//
// raft-wal keeps a sealed segment's writer, and the commit buffer it grew
// to its largest write, as the segment's reader until the segment is
// truncated away. The segment filer here releases the writer once the
// segment is sealed and reads the sealed file instead (wal_sealed.go), so
// the segments Raft still holds pin no buffers (docs/performance.md,
// "Memory").
//
// # The recent entries
//
// CacheRecent answers Raft's reads of the entries it has just written (a
// leader sending them to each follower, a follower applying them) from
// memory. It is bounded in bytes, not entries as raft.LogCache is: an
// entry is a whole produce call of up to several MiB, so a count that
// covers a follower's lag at small calls would hold hundreds of MiB at
// large ones. Every write goes through it; a failed write, a gap or a
// DeleteRange empties it (docs/performance.md, "Where the time goes").
//
// # The trailing entries
//
// Raft keeps TrailingLogs entries after each snapshot, a count. At a few
// MiB an entry that count is gigabytes of log, so TrailingBound lowers it
// to what a byte budget holds at the average size of the entries since
// the last snapshot, never below MinTrailingLogs; the node reloads Raft's
// setting with what TrailingBound.Next says (docs/performance.md,
// "Snapshot triggers with the WAL").
package raftstore
