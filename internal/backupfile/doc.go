// Package backupfile is the file format of a logd backup (logctl cluster
// snapshot save, logd restore; docs/operations.md): a Raft snapshot of the
// meta group's state machine and of each data group's, and the bytes of
// every segment each lists, so the file alone restores a cluster.
//
// Layout, every integer big-endian:
//
//	magic    "LOGDBKUP" and a uint32 format version (Version)
//	frames   kind byte, uint64 payload length, payload, CRC-32C of the
//	         kind, length and payload
//
// The first frame is the header (JSON: Header), then the meta group's
// part: one snapshot frame (the Raft snapshot's bytes as the state
// machine wrote them), then, for each segment the snapshot lists and in
// the order it lists them, a segment frame (JSON: Segment, with the
// segment's .meta file) followed by a data frame (the first Segment.Bytes
// bytes of its data file). From version 2 on, each data group the header
// lists (Header.Groups) follows in its order: a group frame (JSON: Group)
// and the group's part, a snapshot frame and segment and data frames as
// the meta group's. Last comes a trailer frame (JSON: Trailer) holding
// the SHA-256 of every byte before it.
//
// A reader reads version 1 (the meta group's part only, as builds before
// data groups were backed up wrote) and version 2. A reader checks each frame's CRC as it streams by and the trailer at
// the end; a file cut short is ErrTruncated and a damaged one a
// *CorruptError, so a restore can refuse it before it has changed
// anything.
//
// Neither side holds more than a frame header and a small JSON frame in
// memory: snapshot and data frames are streamed.
//
// The file holds everything the cluster holds, tokens and ACLs included
// (as Raft replicates them: salted hashes of tokens), so it is a secret.
package backupfile
