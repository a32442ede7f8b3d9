package fsm

import (
	"encoding/json"
	"fmt"

	"github.com/logd-dev/logd/backend"
)

func (f *FSM) applyDeleteTopic(index uint64, _ int64, c DeleteTopic) any {
	f.mu.Lock()
	t, ok := f.topics[c.Name]
	other := ok && c.TopicIndex != 0 && t.CreateIndex != c.TopicIndex
	if ok && !other {
		delete(f.topics, c.Name)
	}
	f.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %q", backend.ErrUnknownTopic, c.Name)
	}
	if other {
		return fmt.Errorf("%w: %q of index %d is not the incarnation %d", backend.ErrUnknownTopic, c.Name, t.CreateIndex, c.TopicIndex)
	}
	// The last snapshot may list its segments, which no peer serves now.
	f.segmentsChanged.Store(true)
	// Its queue groups go with it (their dead-letter topics stay).
	f.queues.dropTopic(c.Name)
	// A file left behind is not divergence: the topic is gone from the state
	// on every replica, and its files are removed after the next snapshot.
	if err := t.remove(index); err != nil {
		f.logger.Warn("delete topic files", "topic", c.Name, "index", index, "err", err)
	}
	return nil
}

// deleteTopicIndexVersion is the delete-topic payload that may name the
// incarnation (DeleteTopic.TopicIndex, DataGroupLevel): a build before
// would ignore it and delete whichever incarnation it holds.
const deleteTopicIndexVersion = 2

// EncodeDeleteTopic encodes a delete-topic stamped with now, in payload
// version 1 or, naming the incarnation, deleteTopicIndexVersion.
func EncodeDeleteTopic(now int64, c DeleteTopic) ([]byte, error) {
	data, err := encodeJSONCommand(CmdDeleteTopic, now, c)
	if err != nil {
		return nil, err
	}
	if c.TopicIndex != 0 {
		data[1] = deleteTopicIndexVersion
	}
	return data, nil
}

func decodeDeleteTopic(p []byte, version byte, _ *keyScratch) (DeleteTopic, error) {
	var c DeleteTopic
	if err := json.Unmarshal(p, &c); err != nil {
		return c, fmt.Errorf("%w: delete-topic: %v", backend.ErrBadCommand, err)
	}
	if version < deleteTopicIndexVersion && c.TopicIndex != 0 {
		return c, fmt.Errorf("%w: delete-topic version %d naming an incarnation", backend.ErrBadCommand, version)
	}
	return c, nil
}
