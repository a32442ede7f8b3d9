package fsm

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/log"
)

// partKey names one partition of one topic incarnation.
type partKey struct {
	topic     string
	incarnate uint64 // the topic's CreateIndex
	partition int32
}

// cleanerState is the FSM's retention bookkeeping. Its zero value is ready.
type cleanerState struct {
	mu sync.Mutex
	// runs holds each partition's last run; guarded by mu.
	runs map[partKey]backend.CleanerRun
	// prepared holds compactions the local cleaner prepared and is
	// proposing, for Apply to commit instead of compacting again; guarded
	// by mu. Whoever removes an entry owns it (commits or discards it).
	prepared map[partKey]*preparedCompaction

	// toRelease are logs whose trimmed or compacted-away segments wait
	// for log.ReleaseRetired, which the cleaner goroutine calls off the
	// apply path (freeing a large file takes long); guarded by mu.
	toRelease []*log.Log
	// release is signalled when toRelease grows (capacity 1); guarded by
	// mu (made on first use).
	release chan struct{}

	// Counters over every applied command (metrics).
	bytesDeleted     atomic.Int64
	recordsCompacted atomic.Int64
	compactions      atomic.Int64
	trims            atomic.Int64
}

// preparedCompaction is a compaction prepared by this node's cleaner for a
// Compact command it is about to propose.
type preparedCompaction struct {
	below, horizon int64
	c              *log.Compaction
}

func (s *cleanerState) setRun(k partKey, r backend.CleanerRun) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runs == nil {
		s.runs = map[partKey]backend.CleanerRun{}
	}
	s.runs[k] = r
}

func (s *cleanerState) run(k partKey) (backend.CleanerRun, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[k]
	return r, ok
}

// retire queues l for release after Apply deleted or replaced segments.
func (s *cleanerState) retire(l *log.Log) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.toRelease = append(s.toRelease, l)
	select {
	case s.releaseChLocked() <- struct{}{}:
	default:
	}
}

func (s *cleanerState) releaseChLocked() chan struct{} {
	if s.release == nil {
		s.release = make(chan struct{}, 1)
	}
	return s.release
}

// releaseCh is signalled when logs wait for releaseRetired.
func (s *cleanerState) releaseCh() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.releaseChLocked()
}

// releaseRetired closes the retired segment files of the queued logs (a
// log closed meanwhile has released them itself).
func (s *cleanerState) releaseRetired() error {
	s.mu.Lock()
	logs := s.toRelease
	s.toRelease = nil
	s.mu.Unlock()
	var errs []error
	for _, l := range logs {
		errs = append(errs, l.ReleaseRetired())
	}
	return errors.Join(errs...)
}

// offer hands a prepared compaction to Apply; it replaces (and discards) an
// older one for the same partition.
func (s *cleanerState) offer(k partKey, p *preparedCompaction) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prepared == nil {
		s.prepared = map[partKey]*preparedCompaction{}
	}
	if old := s.prepared[k]; old != nil {
		old.c.Discard()
	}
	s.prepared[k] = p
}

// take removes and returns the prepared compaction for k, if any.
func (s *cleanerState) take(k partKey) *preparedCompaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.prepared[k]
	delete(s.prepared, k)
	return p
}

// withdraw discards p if Apply has not taken it.
func (s *cleanerState) withdraw(k partKey, p *preparedCompaction) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prepared[k] == p {
		delete(s.prepared, k)
		p.c.Discard()
	}
}

// discardAll drops every prepared compaction (the logs are closing).
func (s *cleanerState) discardAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, p := range s.prepared {
		p.c.Discard()
		delete(s.prepared, k)
	}
}

// LastCleanerRun returns the last retention or compaction run applied to a
// partition on this node.
func (f *FSM) LastCleanerRun(topic string, createIndex uint64, partition int32) (backend.CleanerRun, bool) {
	return f.cleaner.run(partKey{topic, createIndex, partition})
}

// CleanerCounters returns the totals since this node started.
func (f *FSM) CleanerCounters() backend.CleanerCounters {
	return backend.CleanerCounters{
		BytesDeleted:     f.cleaner.bytesDeleted.Load(),
		RecordsCompacted: f.cleaner.recordsCompacted.Load(),
		Trims:            f.cleaner.trims.Load(),
		Compactions:      f.cleaner.compactions.Load(),
	}
}

// ProtectedFrom is the lowest offset of a partition that retention and
// compaction must keep: the lowest start offset of the topic's queue
// groups, below which each has finished (acked or dead-lettered) every
// record. It is derived from replicated state only, because Apply clamps
// trims with it. Replay consumer groups never protect anything (as in
// Kafka: a group left behind follows its reset policy).
func (f *FSM) ProtectedFrom(t *Topic, partition int32) int64 {
	return f.queues.protectedFrom(t.Name, partition)
}

// OfferCompaction hands a compaction the local cleaner prepared on
// partition p of t to Apply, which commits it instead of compacting again
// when the Compact command the cleaner is about to propose (same below and
// horizon) is applied. withdraw discards it if Apply has not taken it; call
// it once the proposal is over.
func (f *FSM) OfferCompaction(t *Topic, p int32, below, horizon int64, c *log.Compaction) (withdraw func()) {
	k := partKey{t.Name, t.CreateIndex, p}
	prep := &preparedCompaction{below: below, horizon: horizon, c: c}
	f.cleaner.offer(k, prep)
	return func() { f.cleaner.withdraw(k, prep) }
}

// RetiredSegments is signalled when applied trims or compactions retired
// segment files; ReleaseRetired then closes them, off the apply path
// (freeing a large file takes long).
func (f *FSM) RetiredSegments() <-chan struct{} { return f.cleaner.releaseCh() }

// ReleaseRetired closes the segment files applied trims and compactions
// retired.
func (f *FSM) ReleaseRetired() error { return f.cleaner.releaseRetired() }
