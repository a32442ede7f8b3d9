package fsm

import (
	"fmt"

	"github.com/logd-dev/logd/partition"
	"github.com/logd-dev/logd/queue"
)

// validateQueueCreate checks a QueueCreate against the topic; the node calls
// it before proposing and Apply again, so a bad command changes nothing.
func validateQueueCreate(t *Topic, c *QueueCreate) (queue.Config, error) {
	if err := queue.ValidateName(c.Group); err != nil {
		return queue.Config{}, err
	}
	cfg := c.Config.WithDefaults(c.Topic, c.Group)
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	if err := partition.ValidateTopicName(cfg.DeadLetterTopic); err != nil {
		return cfg, fmt.Errorf("%w: dead-letter topic: %v", queue.ErrInvalidConfig, err)
	}
	if cfg.DeadLetterTopic == t.Name {
		return cfg, fmt.Errorf("%w: the dead-letter topic must differ from the topic", queue.ErrInvalidConfig)
	}
	return cfg, nil
}

func (f *FSM) applyQueueCreate(index uint64, now int64, c QueueCreate) any {
	t, err := f.Topic(c.Topic)
	if err != nil {
		return err
	}
	cfg, err := validateQueueCreate(t, &c)
	if err != nil {
		return err
	}
	f.queues.mu.Lock()
	defer f.queues.mu.Unlock()
	if _, err := f.queues.getLocked(c.Topic, c.Group); err == nil {
		return fmt.Errorf("%w: %s on topic %s", queue.ErrGroupExists, c.Group, c.Topic)
	}
	starts := make([]int64, len(t.Partitions))
	if c.FromEnd {
		starts = queueEnds(t)
	}
	q, err := queue.New(c.Topic, c.Group, cfg, starts, c.Secret, index, now)
	if err != nil {
		return err
	}
	if _, err := f.ensureDeadLetterTopic(index, now, t, cfg.DeadLetterTopic); err != nil {
		return f.stop(fmt.Errorf("apply index %d: %w", index, err))
	}
	if f.AppliedLevel() >= QueueLevel {
		// A group that works the topic from its start sizes the records
		// already there once, here.
		src := f.newQueueSource(t, cfg.DeadlineHeader, f.queues.windowsLocked(t))
		if err := q.SetExactBytes(src, queueEnds(t), now); err != nil {
			return f.stop(fmt.Errorf("apply index %d: size the backlog of queue group %s/%s: %w", index, c.Topic, c.Group, err))
		}
	}
	f.queues.putLocked(q)
	return q.Config()
}

// ValidateQueueCreate checks a QueueCreate against the topic as Apply will.
func ValidateQueueCreate(t *Topic, c QueueCreate) error {
	_, err := validateQueueCreate(t, &c)
	return err
}
