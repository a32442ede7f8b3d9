package replication

import (
	"fmt"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
)

// The checks a create or alter of a topic passes before it is proposed,
// for front ends that answer a request to validate only (the Kafka
// protocol's CreateTopics and IncrementalAlterConfigs with validate_only)
// and that describe a topic's settings with their defaults.

// TopicConfigDefaults returns every topic setting with its default value,
// a copy the caller owns.
func (b *Backend) TopicConfigDefaults() map[string]string {
	return fsm.TopicConfigDefaults()
}

// ValidateCreateTopic checks a creation as CreateTopic does before it
// proposes it, without proposing anything: ErrInvalidTopicName,
// backend.ErrInvalidArgument, backend.ErrInvalidConfig, backend.ErrTopicExists (on this node's
// state). The cluster's quota is checked only when the creation is applied.
func (b *Backend) ValidateCreateTopic(r backend.CreateTopic) error {
	c := createTopicIn(r)
	if err := fsm.ValidateCreateTopic(c); err != nil {
		return err
	}
	if _, err := b.FSM().Topic(c.Name); err == nil {
		return fmt.Errorf("%w: %q", backend.ErrTopicExists, c.Name)
	}
	return nil
}

// ValidateAlterTopic checks a change of settings as AlterTopic does before
// it proposes it, without proposing anything: backend.ErrUnknownTopic,
// backend.ErrInvalidConfig, backend.ErrInvalidArgument.
func (b *Backend) ValidateAlterTopic(c backend.AlterTopic) error {
	t, err := b.FSM().Topic(c.Name)
	if err != nil {
		return err
	}
	return fsm.ValidateAlterTopic(t, fsm.AlterTopic(c))
}
