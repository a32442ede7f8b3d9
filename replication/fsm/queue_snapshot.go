package fsm

import (
	"fmt"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/queue"
)

// queueManifestVersion versions the queue part of a snapshot manifest.
const queueManifestVersion = 1

// queueManifest is the queue groups' state in a snapshot.
type queueManifest struct {
	Version int              `json:"version"`
	Groups  []queue.Snapshot `json:"groups"`
}

// snapshotQueues captures every queue group (deep copies), on the Raft
// goroutine, between applies; nil when there are none.
func (f *FSM) snapshotQueues() *queueManifest {
	f.queues.mu.RLock()
	defer f.queues.mu.RUnlock()
	qs := f.queues.sortedLocked()
	if len(qs) == 0 {
		return nil
	}
	m := &queueManifest{Version: queueManifestVersion}
	for _, q := range qs {
		m.Groups = append(m.Groups, q.Snapshot())
	}
	return m
}

// restoreQueues replaces the queue groups with a snapshot's (nil: none).
func (f *FSM) restoreQueues(m *queueManifest) error {
	qs := queueGroups{}
	if m != nil {
		if m.Version != queueManifestVersion {
			return fmt.Errorf("restore: %w: queue manifest version %d", backend.ErrUnknownCommand, m.Version)
		}
		for _, s := range m.Groups {
			q, err := queue.Restore(s)
			if err != nil {
				return fmt.Errorf("restore: %w", err)
			}
			qs.putLocked(q)
		}
	}
	f.queues.mu.Lock()
	f.queues.byTopic = qs.byTopic
	f.queues.windows = nil
	f.queues.mu.Unlock()
	return nil
}
