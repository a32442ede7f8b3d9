package queue

import "errors"

// Errors of queue groups. A refused operation returns one of them (wrapped
// with detail) and changes nothing. A stale token is not an error of the
// call: each token of an ack, nack or extend gets its own TokenResult.
var (
	// ErrGroupNotFound means the queue group does not exist on the topic.
	ErrGroupNotFound = errors.New("queue: queue group not found")
	// ErrGroupExists means a queue group of that name already exists on
	// the topic.
	ErrGroupExists = errors.New("queue: queue group already exists")
	// ErrInvalidConfig means a queue group setting is out of range.
	ErrInvalidConfig = errors.New("queue: invalid queue group config")
	// ErrInvalidRequest means a claim, ack, nack or extend is malformed
	// (bad counts, durations or names).
	ErrInvalidRequest = errors.New("queue: invalid queue request")
	// ErrBadToken means a delivery token could not be parsed: it was never
	// issued by a queue group.
	ErrBadToken = errors.New("queue: malformed delivery token")
	// ErrStaleToken means a token is not the current delivery's, or its
	// lease has expired; the operation changed nothing.
	ErrStaleToken = errors.New("queue: stale delivery token")
	// ErrGroupBusy means an operation that needs the group idle (moving
	// its start offsets, deleting it) found a record under a live lease.
	ErrGroupBusy = errors.New("queue: queue group has records in flight")
)
