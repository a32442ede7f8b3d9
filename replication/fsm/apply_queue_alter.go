package fsm

import (
	"fmt"

	"github.com/logd-dev/logd/partition"
	"github.com/logd-dev/logd/queue"
)

func (f *FSM) applyQueueAlter(index uint64, now int64, c QueueAlter) any {
	t, err := f.Topic(c.Topic)
	if err != nil {
		return err
	}
	f.queues.mu.Lock()
	defer f.queues.mu.Unlock()
	q, err := f.queues.getLocked(c.Topic, c.Group)
	if err != nil {
		return err
	}
	cfg := c.Config.WithDefaults(c.Topic, c.Group)
	if err := partition.ValidateTopicName(cfg.DeadLetterTopic); err != nil || cfg.DeadLetterTopic == t.Name {
		return fmt.Errorf("%w: dead-letter topic %q is not usable", queue.ErrInvalidConfig, cfg.DeadLetterTopic)
	}
	if err := q.SetConfig(cfg); err != nil {
		return err
	}
	if _, err := f.ensureDeadLetterTopic(index, now, t, cfg.DeadLetterTopic); err != nil {
		return f.stop(fmt.Errorf("apply index %d: %w", index, err))
	}
	return q.Config()
}
