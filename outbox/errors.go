package outbox

import "errors"

var (
	// ErrBadTable means a table name is not a plain SQL identifier
	// (ASCII letters, digits and underscores, not starting with a digit,
	// at most 63 bytes); names are spliced into SQL, so nothing else is
	// accepted.
	ErrBadTable = errors.New("outbox: bad table name")
	// ErrBadMessage means a message cannot be written: no topic, or an id
	// that is not a valid outbox id.
	ErrBadMessage = errors.New("outbox: bad message")
	// ErrBadOptions means options that cannot be used.
	ErrBadOptions = errors.New("outbox: bad options")
)
