// Package backupfile is the file format of a logd backup (logctl cluster
// snapshot save, logd restore; docs/operations.md): one Raft snapshot of
// the state machine and the bytes of every segment it lists, so the file
// alone restores a cluster.
//
// Layout, every integer big-endian:
//
//	magic    "LOGDBKUP" and a uint32 format version (Version)
//	frames   kind byte, uint64 payload length, payload, CRC-32C of the
//	         kind, length and payload
//
// The first frame is the header (JSON: Header), then one snapshot frame
// (the Raft snapshot's bytes as the state machine wrote them), then, for
// each segment the snapshot lists and in the order it lists them, a
// segment frame (JSON: Segment, with the segment's .meta file) followed by
// a data frame (the first Segment.Bytes bytes of its data file), and last
// a trailer frame (JSON: Trailer) holding the SHA-256 of every byte before
// it. A reader checks each frame's CRC as it streams by and the trailer at
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
