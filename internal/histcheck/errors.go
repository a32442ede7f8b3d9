package histcheck

import (
	"errors"
	"fmt"
)

// ErrFormat is returned (wrapped in a LineError) when a history file is
// not one Save wrote.
var ErrFormat = errors.New("histcheck: not a history file")

// LineError reports the line of a history file that could not be read.
type LineError struct {
	Line int   // 1-based
	Err  error // what was wrong with it
}

func (e *LineError) Error() string { return fmt.Sprintf("history line %d: %v", e.Line, e.Err) }

// Unwrap returns the cause.
func (e *LineError) Unwrap() error { return e.Err }

// ErrInvalid is returned (wrapped in an OpError) for a call no Recorder
// would record: an unknown kind or outcome, a return before the call, an
// ID used twice.
var ErrInvalid = errors.New("histcheck: invalid call")

// OpError reports the call of a history that is invalid.
type OpError struct {
	ID  int   // the call's ID
	Err error // what is wrong with it
}

func (e *OpError) Error() string { return fmt.Sprintf("call %d: %v", e.ID, e.Err) }

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }
