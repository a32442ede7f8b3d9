package group

import "errors"

// Errors of consumer groups. Each refused operation returns one of them
// (wrapped with detail) and changes nothing.
var (
	// ErrConsumerGroupNotFound means the consumer group does not exist.
	ErrConsumerGroupNotFound = errors.New("group: consumer group not found")
	// ErrConsumerGroupNotEmpty means the operation needs a group without
	// live members (delete).
	ErrConsumerGroupNotEmpty = errors.New("group: consumer group has live members")
	// ErrUnknownMember means the member is not (or no longer) in the group:
	// it left, or missed its session timeout. It must join again.
	ErrUnknownMember = errors.New("group: unknown member")
	// ErrStaleGeneration means a commit or fetch carried a generation older
	// than the member's current ownership of the partition (the partition
	// moved, or its offset was reset): the member must refresh its
	// assignment (heartbeat or join) and restart from the committed offset.
	ErrStaleGeneration = errors.New("group: stale generation")
	// ErrNotAssigned means the member does not own the partition in the
	// generation it named.
	ErrNotAssigned = errors.New("group: partition not assigned to member")
	// ErrOffsetAboveEnd means a commit or reset named an offset above the
	// partition's end offset.
	ErrOffsetAboveEnd = errors.New("group: offset above the partition's end")
	// ErrInvalidGroupRequest means a group request's arguments are invalid
	// (empty names, negative offsets, unknown partitions, bad timeouts).
	ErrInvalidGroupRequest = errors.New("group: invalid request")
	// ErrUnknownGroupTopic means a group request named a topic that does not
	// exist.
	ErrUnknownGroupTopic = errors.New("group: unknown topic")
	// ErrNoResetPolicy means a member's position is outside the log (below
	// its start after retention, or there is no committed offset) and its
	// reset policy is "none".
	ErrNoResetPolicy = errors.New("group: offset out of range and reset policy is none")
)
