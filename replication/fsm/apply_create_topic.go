package fsm

import (
	"fmt"

	"github.com/logd-dev/logd/partition"
)

// MaxPartitions bounds a topic's partition count.
const MaxPartitions = 10000

// validateCreateTopic checks a CreateTopic; the server calls it before
// proposing and Apply calls it again, so a bad command changes nothing.
func validateCreateTopic(c CreateTopic) (map[string]string, error) {
	if err := partition.ValidateTopicName(c.Name); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	if c.Partitions < 1 || c.Partitions > MaxPartitions {
		return nil, fmt.Errorf("%w: partitions must be in [1, %d], got %d", ErrInvalidArgument, MaxPartitions, c.Partitions)
	}
	return ResolveTopicConfig(c.Config)
}

func (f *FSM) applyCreateTopic(index uint64, now int64, c CreateTopic) any {
	cfg, err := validateCreateTopic(c)
	if err != nil {
		return err
	}
	if _, err := f.Topic(c.Name); err == nil {
		return fmt.Errorf("%w: %q", ErrTopicExists, c.Name)
	}
	t := &Topic{Name: c.Name, Config: cfg, CreatedNanos: now, CreateIndex: index}
	if err := openTopic(f.root, t, c.Partitions, f.logOpts); err != nil {
		return f.stop(fmt.Errorf("create topic %s at index %d: %w", c.Name, index, err))
	}
	f.mu.Lock()
	f.topics[c.Name] = t
	f.mu.Unlock()
	return t
}

// ValidateCreateTopic checks a CreateTopic as Apply will, so a proposer can
// refuse a bad one before it reaches the Raft log.
func ValidateCreateTopic(c CreateTopic) error {
	_, err := validateCreateTopic(c)
	return err
}
