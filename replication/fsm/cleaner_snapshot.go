package fsm

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/logd-dev/logd/backend"
)

// cleanerManifestVersion versions the cleaner part of a snapshot manifest.
const cleanerManifestVersion = 1

// cleanerManifest is the retention bookkeeping in a snapshot: each
// partition's last cleaner run, so `logctl topic describe` shows it after a
// restart or on a follower that installed the snapshot. The counters behind
// the metrics are not in it: they count this process's work.
type cleanerManifest struct {
	Version int                  `json:"version"`
	Runs    []cleanerRunManifest `json:"runs"`
}

type cleanerRunManifest struct {
	Topic          string `json:"topic"`
	TopicIndex     uint64 `json:"topic_index"`
	Partition      int32  `json:"partition"`
	TimeNanos      int64  `json:"time_nanos"`
	Action         string `json:"action"`
	BytesDeleted   int64  `json:"bytes_deleted,omitempty"`
	RecordsRemoved int64  `json:"records_removed,omitempty"`
}

// snapshotCleaner captures the last run of every partition of a topic that
// still exists (runs of deleted topics are dropped here), sorted so the
// manifest does not depend on map order; nil when there are none. It runs
// on the Raft goroutine, between applies.
func (f *FSM) snapshotCleaner() *cleanerManifest {
	live := map[string]uint64{}
	for _, t := range f.Topics() {
		live[t.Name] = t.CreateIndex
	}
	f.cleaner.mu.Lock()
	defer f.cleaner.mu.Unlock()
	var runs []cleanerRunManifest
	for k, r := range f.cleaner.runs {
		if idx, ok := live[k.topic]; !ok || idx != k.incarnate {
			continue
		}
		runs = append(runs, cleanerRunManifest{Topic: k.topic, TopicIndex: k.incarnate, Partition: k.partition,
			TimeNanos: r.TimeNanos, Action: r.Action, BytesDeleted: r.BytesDeleted, RecordsRemoved: r.RecordsRemoved})
	}
	if len(runs) == 0 {
		return nil
	}
	slices.SortFunc(runs, func(a, b cleanerRunManifest) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.TopicIndex, b.TopicIndex), cmp.Compare(a.Partition, b.Partition))
	})
	return &cleanerManifest{Version: cleanerManifestVersion, Runs: runs}
}

// restoreCleaner replaces the last runs with a snapshot's (nil: none, as in
// snapshots taken before the field existed). Prepared compactions are not
// touched: Restore discards them with the logs they were prepared on.
func (f *FSM) restoreCleaner(m *cleanerManifest) error {
	runs := map[partKey]backend.CleanerRun{}
	if m != nil {
		if m.Version != cleanerManifestVersion {
			return fmt.Errorf("restore: %w: cleaner manifest version %d", backend.ErrUnknownCommand, m.Version)
		}
		for _, r := range m.Runs {
			runs[partKey{r.Topic, r.TopicIndex, r.Partition}] = backend.CleanerRun{
				TimeNanos: r.TimeNanos, Action: r.Action, BytesDeleted: r.BytesDeleted, RecordsRemoved: r.RecordsRemoved}
		}
	}
	f.cleaner.mu.Lock()
	f.cleaner.runs = runs
	f.cleaner.mu.Unlock()
	return nil
}
