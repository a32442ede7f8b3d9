package partition

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidTopicName means a topic name breaks Kafka's naming rules.
	ErrInvalidTopicName = errors.New("partition: invalid topic name")

	// ErrInvalidPartition means a partition number is negative.
	ErrInvalidPartition = errors.New("partition: invalid partition")
)

// TopicNameError says why a topic name is invalid. It matches
// [ErrInvalidTopicName].
type TopicNameError struct {
	Name   string // the rejected name, shortened if very long
	Reason string
}

func (e *TopicNameError) Error() string {
	return fmt.Sprintf("partition: invalid topic name %q: %s", e.Name, e.Reason)
}

// Unwrap returns [ErrInvalidTopicName].
func (e *TopicNameError) Unwrap() error { return ErrInvalidTopicName }
