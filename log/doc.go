// Package log is one partition's storage: a segmented, checksummed,
// append-only log of Kafka RecordBatch v2 bytes. It imports only the standard
// library and knows nothing of replication; the replication layer drives it
// through Append, Roll, Sync, DeleteBefore and TruncateTo, and a replica
// that is behind installs segments copied from a peer with StageSegment and
// InstallStaged (install.go).
//
// # Format
//
// The stored unit is a Kafka RecordBatch v2 (61-byte big-endian header; CRC-32C
// over bytes 21..end). Append checks the batch (length = 12 + batchLength,
// magic 2, CRC, recordCount == lastOffsetDelta+1, size <= MaxBatchBytes) and
// rewrites only the two fields outside the CRC: baseOffset (bytes 0..8), set to
// EndOffset, and partitionLeaderEpoch (bytes 12..16), which carries the applied
// index (below). Every other byte is stored and served as received. Offsets
// are dense: each batch's baseOffset is the previous one's
// baseOffset+lastOffsetDelta+1.
//
// A segment is named by its base offset (20 digits) and has four files:
//
//	<base>.log        the batches, back to back
//	<base>.index      sparse offset index (relative offset uint32, position uint32)
//	<base>.timeindex  sparse time index (running max timestamp int64, relative offset uint32)
//	<base>.meta       base offset, base applied index, creation time, CRC (see meta.go)
//
// The indexes are caches, kept in memory (20 bytes per entry, one entry per
// IndexIntervalBytes of data: about 0.5% of the data size by default), checked
// when loaded and whenever a lookup uses an entry, and rebuilt from the data
// file when found wrong.
//
// # Applied index
//
// The caller's applied index (a raft index) survives restart with the data
// and costs no extra fsync: each batch's partitionLeaderEpoch field holds, as a
// uint32, the batch's applied index minus its segment's base applied index,
// which the segment's .meta file records when the segment is created (the
// .meta is synced with the directory then, and is authoritative: a missing or
// invalid one is a *CorruptionError). When a delta would not fit, the log
// rolls first (an empty active segment instead gets its .meta replaced).
// After Open, AppliedIndex is that of the last valid batch, or the active
// segment's base applied index if it is empty. Served batches carry this delta
// in their leader-epoch field; a Kafka-protocol front end must overwrite it.
// The field is outside the CRC: damage to it is detected only when it makes
// the deltas of a segment decrease.
//
// # Durability and recovery
//
// With SyncEveryAppend (the default) a batch is fdatasynced before Append
// returns. A closed segment is synced when it is rolled, whatever the policy,
// so only the active segment can have an unsynced tail. Indexes are not synced
// per append (they are rebuilt as needed).
//
// Open recovers (see Open for details): the active segment's headers are
// walked from its start and its CRCs checked from its last on-disk index
// entry; a torn tail — an incomplete or failing batch with no whole valid
// batch after it — is truncated. Any other damage is a *CorruptionError
// naming the segment and byte position: a bad batch followed by valid ones in
// the active segment, or any framing damage in a closed segment. Closed
// segments are checked cheaply on Open (headers from the last index entry
// must end exactly at the end of the file) and their CRCs lazily: Read checks
// the CRC of every batch it returns and never returns a failing one.
//
// After a failed write or sync, the error is sticky: the batch is not
// readable from this Log, the log tries to cut its bytes off the file, and
// every later mutation returns the error; the caller should stop. Whether
// that batch is present after a restart is unknown (as for a timed-out
// request): if its bytes reached the disk whole it is recovered, together
// with its applied index, so a caller that replays from AppliedIndex neither
// loses nor duplicates it. Every batch acknowledged under SyncEveryAppend
// survives a power cut.
//
// # Concurrency
//
// One goroutine appends (Append, Roll, Sync, DeleteBefore, TruncateTo, Close
// are also serialized by a mutex) while any number of goroutines call Read,
// OffsetForTime and the getters. Readers load an immutable view (an
// atomic.Pointer to the segment list and the active segment's extent) and
// never see a batch before Append has returned it. DeleteBefore, TruncateTo
// and Close wait for in-flight reads before closing or shrinking files.
// The log starts no goroutines.
//
// # Caveats
//
//   - Segment age is measured from the segment's creation time (the time of
//     the append or Roll that created it), so that it survives restart.
//   - Damage to the time index that keeps it plausible (non-decreasing, not
//     below the batch it names) can make OffsetForTime answer a later offset
//     of the same segment; offset-index damage is always caught at use.
//   - Only one process may open a directory; nothing enforces it.
package log
