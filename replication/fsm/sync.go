package fsm

import (
	"errors"
	"fmt"

	"github.com/logd-dev/logd/log"
)

// SyncDirty fsyncs each partition log with at least minBytes of batches
// appended since its last sync (minBytes <= 0: any). It is meant for a
// goroutine of the node's, beside Apply: a log's Sync holds up no append
// (log.Log.Sync). Partition data is otherwise fsynced only by a snapshot's
// Persist, which would then write everything appended since the last
// snapshot (128 MiB by default) in one burst, and the Raft log's own fsyncs,
// on which every commit waits, would queue behind it; synced a few MiB at a
// time, the same bytes reach the disk in small steps. Durability does not
// depend on it: the Raft log is the write-ahead log, and Persist still syncs
// every partition before the snapshot is written.
//
// A failed fsync is returned and leaves that log refusing appends, so the
// next apply to it stops the node, as when Persist fails. A log closed
// meanwhile (its topic deleted) was synced by Close.
func (f *FSM) SyncDirty(minBytes int64) error {
	for _, t := range f.Topics() {
		for _, p := range t.Hosted() {
			if n := p.unsynced.Load(); n == 0 || n < minBytes {
				continue
			}
			if err := p.sync(); err != nil {
				return err
			}
		}
	}
	return nil
}

// sync fsyncs the partition's log. The bytes counted before the sync
// began are covered by it; those appended meanwhile count for the next.
func (p *Partition) sync() error {
	p.unsynced.Swap(0)
	if err := p.log.Sync(); err != nil && !errors.Is(err, log.ErrClosed) {
		return fmt.Errorf("sync %s-%d: %w", p.Topic, p.Index, err)
	}
	return nil
}
