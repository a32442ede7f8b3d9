package group

import "errors"

// Errors of queue groups. A refused operation returns one of them (wrapped
// with detail) and changes nothing. A stale token is not an error of the
// call: each token of an ack, nack or extend gets its own TokenResult.
var (
	// ErrQueueGroupNotFound means the queue group does not exist on the topic.
	ErrQueueGroupNotFound = errors.New("group: queue group not found")
	// ErrQueueGroupExists means a queue group of that name already exists on
	// the topic.
	ErrQueueGroupExists = errors.New("group: queue group already exists")
	// ErrInvalidQueueConfig means a queue group setting is out of range.
	ErrInvalidQueueConfig = errors.New("group: invalid queue group config")
	// ErrInvalidQueueRequest means a claim, ack, nack or extend is malformed
	// (bad counts, durations or names).
	ErrInvalidQueueRequest = errors.New("group: invalid queue request")
	// ErrBadToken means a delivery token could not be parsed: it was never
	// issued by a queue group.
	ErrBadToken = errors.New("group: malformed delivery token")
	// ErrStaleToken means a token is not the current delivery's, or its
	// lease has expired; the operation changed nothing.
	ErrStaleToken = errors.New("group: stale delivery token")
)
