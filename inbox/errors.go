package inbox

import "errors"

var (
	// ErrBadTable means a table name is not a plain SQL identifier (ASCII
	// letters, digits and underscores, not starting with a digit, at most
	// 63 bytes).
	ErrBadTable = errors.New("inbox: bad table name")
	// ErrBadID means an empty message id, or one longer than MaxIDBytes.
	ErrBadID = errors.New("inbox: bad message id")
	// ErrNoID means a record carries no id header and the adapter was not
	// allowed to fall back to its offset.
	ErrNoID = errors.New("inbox: record has no message id")
)
