package replication

import (
	"errors"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/log"
)

// storageError is an error of the stored logs as the backend reports it:
// the storage's error, text and chain kept, that also matches the
// backend's value for it (errors.Is and errors.As find either), so a front
// end maps it without importing package log.
type storageError struct {
	kind error // a backend sentinel, or a *backend.OutOfRangeError
	err  error
}

func (e *storageError) Error() string   { return e.err.Error() }
func (e *storageError) Unwrap() []error { return []error{e.kind, e.err} }

// fromStorage returns err with the backend's value for the storage error
// it holds; other errors, and nil, unchanged.
func fromStorage(err error) error {
	if err == nil {
		return nil
	}
	var oor *log.OutOfRangeError
	switch {
	case errors.As(err, &oor):
		return &storageError{kind: &backend.OutOfRangeError{Offset: oor.Offset, Start: oor.Start, End: oor.End}, err: err}
	case errors.Is(err, log.ErrOffsetOutOfRange):
		return &storageError{kind: backend.ErrOffsetOutOfRange, err: err}
	case errors.Is(err, log.ErrCorrupt):
		return &storageError{kind: backend.ErrCorrupt, err: err}
	case errors.Is(err, log.ErrClosed):
		return &storageError{kind: backend.ErrLogClosed, err: err}
	case errors.Is(err, log.ErrBatchTooLarge):
		return &storageError{kind: backend.ErrBatchTooLarge, err: err}
	case errors.Is(err, log.ErrInvalidBatch):
		return &storageError{kind: backend.ErrInvalidBatch, err: err}
	}
	return err
}
