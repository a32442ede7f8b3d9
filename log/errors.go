package log

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers compare with errors.Is; errors carrying data are the
// types below, which match their sentinel with errors.Is and expose their fields
// with errors.As.
var (
	// ErrInvalidBatch reports a batch that Append refused: it is not a well
	// formed Kafka RecordBatch v2. Returned as *InvalidBatchError.
	ErrInvalidBatch = errors.New("log: invalid record batch")

	// ErrBatchTooLarge reports a batch larger than Options.MaxBatchBytes.
	ErrBatchTooLarge = errors.New("log: record batch too large")

	// ErrOffsetOutOfRange reports an offset outside [StartOffset, EndOffset].
	// Returned as *OutOfRangeError.
	ErrOffsetOutOfRange = errors.New("log: offset out of range")

	// ErrCorrupt reports stored bytes that fail their checks (CRC, framing,
	// dense offsets, a missing or invalid .meta file). Returned as
	// *CorruptionError. The damaged range is never served.
	ErrCorrupt = errors.New("log: corrupt segment")

	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("log: closed")

	// ErrAppliedIndexRegressed reports an AppendMeta.AppliedIndex lower than
	// the log's current AppliedIndex.
	ErrAppliedIndexRegressed = errors.New("log: applied index regressed")

	// ErrNotBatchBoundary reports a TruncateTo target that is not the base
	// offset of a stored batch (nor EndOffset).
	ErrNotBatchBoundary = errors.New("log: offset is not a batch boundary")
)

// InvalidBatchError says why Append refused a batch. It matches ErrInvalidBatch.
type InvalidBatchError struct {
	Reason string
}

func (e *InvalidBatchError) Error() string { return "log: invalid record batch: " + e.Reason }

// Is reports whether target is ErrInvalidBatch.
func (e *InvalidBatchError) Is(target error) bool { return target == ErrInvalidBatch }

// OutOfRangeError reports an offset outside [Start, End]. It matches
// ErrOffsetOutOfRange.
type OutOfRangeError struct {
	Offset, Start, End int64
}

func (e *OutOfRangeError) Error() string {
	return fmt.Sprintf("log: offset %d out of range [%d, %d]", e.Offset, e.Start, e.End)
}

// Is reports whether target is ErrOffsetOutOfRange.
func (e *OutOfRangeError) Is(target error) bool { return target == ErrOffsetOutOfRange }

// CorruptionError locates damaged stored data: the segment (by base offset)
// and the byte position in its data file where the first bad batch starts
// (or -1 when the damage is not in the data file, e.g. a bad .meta). Err says
// what was wrong. It matches ErrCorrupt.
type CorruptionError struct {
	Segment  int64
	Position int64
	Err      error
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("log: corrupt segment %d at position %d: %v", e.Segment, e.Position, e.Err)
}

// Unwrap returns the underlying cause.
func (e *CorruptionError) Unwrap() error { return e.Err }

// Is reports whether target is ErrCorrupt.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

func invalid(format string, args ...any) error {
	return &InvalidBatchError{Reason: fmt.Sprintf(format, args...)}
}

func corrupt(seg, pos int64, format string, args ...any) error {
	return &CorruptionError{Segment: seg, Position: pos, Err: fmt.Errorf(format, args...)}
}
