package raftstore

import "errors"

var (
	// ErrLogStoreMismatch means Options.LogStore names one log store and
	// the directory's Raft log is in the other, or that the directory
	// holds a log in both (docs/operations.md, "Raft log store"). Open
	// changes nothing when it returns it.
	ErrLogStoreMismatch = errors.New("raftstore: raft log store does not match the data dir's")
	// ErrInvalidOptions means Options.Validate refused the options.
	ErrInvalidOptions = errors.New("raftstore: invalid options")
)
