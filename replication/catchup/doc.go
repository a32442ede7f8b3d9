// Package catchup copies partition segments between a node and what lies
// outside its Raft log: a follower installing a snapshot fetches the
// segment bytes it lists from a peer (install.go, over HTTP:
// segment_fetch.go from the peers' segment_serve.go), a backup streams
// cuts of the meta group and the data groups (a snapshot and those bytes
// each) into a file (backup.go), and a restore builds a new node's data
// directory from such a file (restore.go). See
// docs/architecture.md for where it sits, and docs/operations.md, "Backup
// and restore", for backups as operators see them; the file's format is
// package internal/backupfile's.
//
// A snapshot holds no segment bytes, only a manifest of them
// (replication/fsm snapshot.go). The state machine plans which segments
// it lacks and asks its fsm.SegmentFetcher for them: NewSegmentFetcher's
// reads peers, a restore's reads the backup file. Package replication
// hands this package what it needs of a node (its Raft snapshots, its
// state machine's segments, its peer TLS, its logger) and keeps thin
// methods over it (Node.Backup, Backend.SegmentHandler); this package
// imports nothing of replication. It holds no package-level state: every
// call takes the directories, state machine and logger of one Raft group,
// so a process that runs several groups calls it once per group.
//
// Invariants, each with a test:
//
//  1. A follower installs only segments whose every batch it checked: a
//     fetched segment is staged beside the partition's log
//     (log.StageSegment, which checks each batch's CRC as it is written),
//     and only once every segment the partition needs is staged are they
//     swapped in (log.InstallStaged). A fetch that fails leaves the log
//     as it was; a crash during the swap leaves a valid, shorter log that
//     the next install extends (log/install.go)
//     (TestRestoreFetchesMissingSegments; cmd/logd
//     TestClusterSnapshotCatchUp kills a follower during its install).
//  2. A peer serves a segment only as the snapshot lists it: any prefix of
//     a segment that only grew by appends, a compacted one only in the
//     very version listed (same end, same size). A segment changed since
//     is answered as gone (410, backend.ErrSegmentGone); the install then
//     gives up at once instead of retrying until its timeout, and the
//     leader renews its snapshot (replication TestCatchUpAfterCompaction).
//  3. Under peer TLS the segment endpoint answers only callers that
//     presented a verified node certificate of the cluster CA
//     (replication TestSegmentsServedToNodesOnly).
//  4. A cut is a group's state at one Raft index: a snapshot, plus each
//     listed segment's first Bytes bytes. Every listed file is opened and
//     checked again against the listing before a byte is written, and a
//     cut whose segments changed first takes a new snapshot, up to three
//     times (replication TestBackupRestore). Every cut of a backup is
//     taken, its files open, before the file's first byte: the header
//     gives the file's size (replication TestBackupDataGroups).
//  5. A restore goes through the catch-up path (the state machine's
//     Restore, with a fetcher that reads the file and checks every batch)
//     into a directory beside the target, renamed onto it only once the
//     whole file was read and its trailer checked: a truncated or damaged
//     file leaves the target as it was (replication TestBackupRestore;
//     cmd/logd TestBackupRestore). Each data group's part is restored
//     the same way, as the new node's replica of the group, its only
//     voter (replication TestBackupDataGroups; cmd/logd
//     TestBackupRestoreDataGroups); a file of format version 1 restores
//     as before (replication TestRestoreBackupVersion1).
//  6. A follower's reads of segment data from peers go through its
//     node's one Throttle (the move budget, throttle.go): n bytes take at
//     least (n - burst) / rate, however many installs share it
//     (TestThrottleReaderPaces, TestFetchPacedByThrottle; replication
//     TestJoinWithinMoveBudget). A wait for the budget does not count
//     against the install's timeout, and ends when its context does or
//     the node closes (TestThrottleCancelEndsWait, TestFetchStopEndsWait).
//
// Neither side of a transfer holds a segment in memory: files are
// streamed in chunks, and a backup buffers no more than a frame header and
// a segment's .meta file.
//
// Caveats:
//
//   - TakeCut takes whatever state its source holds; only a leader that
//     applied its barrier, or a replica that applied such a leader's
//     index, holds every acknowledged write, and replication's
//     Node.Backup sees to that; it also chooses the data groups and
//     checks their cuts against the meta group's (replication
//     backup_groups.go).
//   - A follower fetches from the peers the snapshot's node registry lists
//     (fsm.FetchRequest.Peers). A restored cluster starts with an empty
//     registry (fsm.ForNewCluster): it never fetches from the nodes of the
//     cluster the backup came from, which may hold other data past the
//     backup's index.
//   - RestoreBackup writes the layout replication.Open reads: raft/ (Raft's
//     file snapshot store and the term in raft.db) and topics/ under the
//     data directory it is given, and the same under groups/g<id>/ for
//     each data group. A change of that layout changes both.
//   - The segment endpoint's path and query are a contract between nodes
//     of different builds: a caller that sends no end offset is answered
//     as by an older build (a short file is 416, never a compacted
//     prefix).
//   - The move budget bounds the receiving side only: a peer serving
//     several followers at once serves each within its own budget. Backups
//     and restores are not paced (docs/operations.md, "Moving replicas").
//   - A backup holds every record, token hash and ACL: the file is a
//     secret (docs/operations.md).
package catchup
