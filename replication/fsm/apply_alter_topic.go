package fsm

import (
	"encoding/json"
	"fmt"
	"maps"

	"github.com/logd-dev/logd/backend"
)

// alterTopicQueueVersion is the alter-topic payload that sets or deletes a
// topic setting of QueueLevel (queueLevelKey), which builds before refuse.
const alterTopicQueueVersion = 2

// decodeAlterTopic reads an alter-topic payload; only
// alterTopicQueueVersion may set or delete a setting of QueueLevel.
func decodeAlterTopic(p []byte, version byte, _ *keyScratch) (AlterTopic, error) {
	var c AlterTopic
	if err := json.Unmarshal(p, &c); err != nil {
		return c, fmt.Errorf("%w: alter-topic: %v", backend.ErrBadCommand, err)
	}
	if version < alterTopicQueueVersion && hasQueueLevelKey(c.Config, c.Delete) {
		return c, fmt.Errorf("%w: alter-topic version %d with a setting of feature level %d", backend.ErrBadCommand, version, QueueLevel)
	}
	return c, nil
}

// EncodeAlterTopic encodes an alter-topic stamped with now, in
// alterTopicQueueVersion (QueueLevel) when it sets or deletes a setting of
// that level, else in version 1.
func EncodeAlterTopic(now int64, c AlterTopic) ([]byte, error) {
	data, err := encodeJSONCommand(CmdAlterTopic, now, c)
	if err != nil {
		return nil, err
	}
	if hasQueueLevelKey(c.Config, c.Delete) {
		data[1] = alterTopicQueueVersion
	}
	return data, nil
}

// validateAlterTopic checks an AlterTopic against the topic's current
// settings and returns the resolved new settings. The server path calls it
// before proposing and Apply calls it again, so a bad command changes
// nothing.
func validateAlterTopic(t *Topic, c AlterTopic) (map[string]string, error) {
	if len(c.Config) == 0 && len(c.Delete) == 0 {
		return nil, fmt.Errorf("%w: no settings to change", backend.ErrInvalidArgument)
	}
	merged := maps.Clone(t.Config)
	for _, k := range c.Delete {
		if _, ok := topicConfigSpecs[k]; !ok {
			return nil, fmt.Errorf("%w: unknown key %q", backend.ErrInvalidConfig, k)
		}
		if _, ok := c.Config[k]; ok {
			return nil, fmt.Errorf("%w: %q is both set and deleted", backend.ErrInvalidConfig, k)
		}
		// Resolving fills the default back in.
		delete(merged, k)
	}
	maps.Copy(merged, c.Config)
	return ResolveTopicConfig(merged)
}

// applyAlterTopic replaces the topic's settings. Topic values are immutable
// once published (readers use their Config without locks), so the FSM
// publishes a copy of the Topic with the new Config; the partitions, and
// their logs, are shared. A new segment.bytes or segment.ms takes effect at
// once for the open logs, here in Apply, so every replica rolls at the same
// batch.
func (f *FSM) applyAlterTopic(index uint64, _ int64, c AlterTopic) any {
	t, err := f.Topic(c.Name)
	if err != nil {
		return err
	}
	cfg, err := validateAlterTopic(t, c)
	if err != nil {
		return err
	}
	segBytes := min(configInt(cfg, ConfigSegmentBytes), maxSegmentBytes)
	segAge := msDuration(configInt(cfg, ConfigSegmentMs))
	for _, p := range t.Hosted() {
		if err := p.log.SetRollPolicy(segBytes, segAge); err != nil {
			return f.stop(fmt.Errorf("alter topic %s at index %d: %w", c.Name, index, err))
		}
	}
	// The window is shared with the new Topic value; its bound changes at
	// this index on every replica (a restored replica reads it from the
	// config), and extra keys go at the next insert.
	t.dedup.SetMaxKeys(int(configInt(cfg, ConfigIdempotencyMaxKeys)))
	nt := *t // fields are copied, the partitions shared
	nt.Config = cfg
	f.mu.Lock()
	f.topics[c.Name] = &nt
	f.mu.Unlock()
	return &nt
}

// ValidateAlterTopic checks an AlterTopic against the topic as Apply will.
func ValidateAlterTopic(t *Topic, c AlterTopic) error {
	_, err := validateAlterTopic(t, c)
	return err
}
