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
