package fsm

import (
	"fmt"

	"github.com/logd-dev/logd/backend"
)

func (f *FSM) applyDeleteTopic(index uint64, _ int64, c DeleteTopic) any {
	f.mu.Lock()
	t, ok := f.topics[c.Name]
	if ok {
		delete(f.topics, c.Name)
	}
	f.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %q", backend.ErrUnknownTopic, c.Name)
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
