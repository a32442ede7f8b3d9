package dedup

import "errors"

var (
	// ErrBadEncoding means a window's encoding (a snapshot section read by
	// [ReadWindow]) is truncated, padded or malformed. A reader's own
	// failure is returned as that error instead, wrapped.
	ErrBadEncoding = errors.New("dedup: malformed idempotency window encoding")

	// ErrIdempotencyConflict means an idempotency key held in the window
	// was sent again with a different payload (another [Digest]). Nothing
	// is appended. Its text reaches clients, so it names no package.
	ErrIdempotencyConflict = errors.New("idempotency key reused with a different payload")
)
