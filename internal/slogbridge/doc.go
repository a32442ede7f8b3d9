// Package slogbridge routes the loggers of logd's dependencies into the
// node's log/slog handler, so that every line a node writes has one format
// (--log-format json gives JSON for hashicorp/raft's lines as for logd's
// own):
//
//   - HCLog is a hashicorp/go-hclog Logger, which hashicorp/raft, its
//     network transport and its snapshot store log through;
//   - Bbolt is a go.etcd.io/bbolt Logger, which Raft's log store
//     (raft-boltdb over bbolt) reports failed operations through.
//
// Levels map one to one (hclog's Trace is below slog's Debug; bbolt's
// Info, which narrates each open and close, is Debug); a line
// needs both the bridge's level and the handler's. Names (hclog's Named)
// become a "logger" attribute. The bridges add no goroutine and keep no
// state beyond their attributes.
package slogbridge
