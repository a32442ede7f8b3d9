package faults

import (
	"cmp"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// LogStore wraps Raft's log store: each write takes Delay longer, and with
// WriteBack set, stored entries are held in memory and handed to the inner
// store only once the oldest of them is WriteBack old (checked on each
// write, as no goroutine runs), or on Close. Until then Raft reads them
// from memory; a process that dies loses them, as a power cut loses the
// writes of a log that is not fsynced. Use it through NewLogStore.
type LogStore struct {
	inner     raft.LogStore
	delay     Delay
	writeBack time.Duration
	now       func() time.Time

	mu sync.Mutex
	// pending are entries not yet written back, in increasing index order
	// (Raft appends in order, and deletes only a prefix, after a snapshot,
	// or a suffix, before it appends over a conflict).
	pending []raft.Log
	since   time.Time // when the oldest pending entry was stored
}

var (
	_ raft.LogStore          = (*LogStore)(nil)
	_ raft.MonotonicLogStore = (*LogStore)(nil)
	_ io.Closer              = (*LogStore)(nil)
	_ raft.StableStore       = StableStore{}
)

// NewLogStore wraps inner; delay and writeBack may be zero. now is the
// clock that ages pending entries (time.Now if nil).
func NewLogStore(inner raft.LogStore, delay Delay, writeBack time.Duration, now func() time.Time) *LogStore {
	if now == nil {
		now = time.Now
	}
	return &LogStore{inner: inner, delay: delay, writeBack: writeBack, now: now}
}

// FirstIndex is the first index held, in the store or in memory.
func (s *LogStore) FirstIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first, err := s.inner.FirstIndex()
	if err != nil || len(s.pending) == 0 {
		return first, err
	}
	if first == 0 {
		return s.pending[0].Index, nil
	}
	return min(first, s.pending[0].Index), nil
}

// LastIndex is the last index held, in memory or in the store.
func (s *LogStore) LastIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	last, err := s.inner.LastIndex()
	if err != nil || len(s.pending) == 0 {
		return last, err
	}
	return max(last, s.pending[len(s.pending)-1].Index), nil
}

// GetLog reads an entry from memory or from the store.
func (s *LogStore) GetLog(index uint64, log *raft.Log) error {
	s.mu.Lock()
	if i, ok := slices.BinarySearchFunc(s.pending, index, func(l raft.Log, index uint64) int { return cmp.Compare(l.Index, index) }); ok {
		*log = s.pending[i]
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	return s.inner.GetLog(index, log)
}

// StoreLog stores one entry.
func (s *LogStore) StoreLog(log *raft.Log) error { return s.StoreLogs([]*raft.Log{log}) }

// StoreLogs stores entries after the delay: in the inner store, or in
// memory with WriteBack.
func (s *LogStore) StoreLogs(logs []*raft.Log) error {
	s.delay.Sleep()
	if s.writeBack <= 0 {
		return s.inner.StoreLogs(logs)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if len(s.pending) > 0 && now.Sub(s.since) >= s.writeBack {
		if err := s.flush(); err != nil {
			return err
		}
	}
	if len(s.pending) == 0 {
		s.since = now
	}
	for _, l := range logs {
		s.pending = append(s.pending, *l)
	}
	return nil
}

// flush writes the pending entries to the inner store. Callers hold s.mu.
func (s *LogStore) flush() error {
	if len(s.pending) == 0 {
		return nil
	}
	ptrs := make([]*raft.Log, len(s.pending))
	for i := range s.pending {
		ptrs[i] = &s.pending[i]
	}
	if err := s.inner.StoreLogs(ptrs); err != nil {
		return err
	}
	s.pending = nil
	return nil
}

// DeleteRange deletes entries in [min, max] from memory and the store.
func (s *LogStore) DeleteRange(min, max uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = slices.DeleteFunc(s.pending, func(l raft.Log) bool { return l.Index >= min && l.Index <= max })
	return s.inner.DeleteRange(min, max)
}

// IsMonotonic passes on the inner store's answer (raft.MonotonicLogStore).
func (s *LogStore) IsMonotonic() bool {
	m, ok := s.inner.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// Close writes the pending entries back: a clean stop loses nothing. It
// does not close the inner store.
func (s *LogStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flush()
}

// StableStore wraps Raft's stable store (current term, vote): each write
// takes Delay longer. Its writes stay durable whatever LogStore does.
type StableStore struct {
	raft.StableStore
	Delay Delay
}

// Set stores a value after the delay.
func (s StableStore) Set(key, val []byte) error {
	s.Delay.Sleep()
	return s.StableStore.Set(key, val)
}

// SetUint64 stores a value after the delay.
func (s StableStore) SetUint64(key []byte, val uint64) error {
	s.Delay.Sleep()
	return s.StableStore.SetUint64(key, val)
}
