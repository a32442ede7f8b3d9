package raftstore

import (
	"sync"

	"github.com/hashicorp/raft"
)

// DefaultRecentLogBytes is the CacheRecent budget a node uses by default
// (replication's Config.RecentLogBytes): at the entry sizes produce
// builds (hundreds of KiB to a few MiB) it holds the last few dozen
// entries, more than a follower that keeps up lags behind.
const DefaultRecentLogBytes = 16 << 20

// recentLogOverhead is what an entry costs in the budget besides its
// data: the raft.Log and the slice header.
const recentLogOverhead = 128

// recentLogs keeps the newest entries stored through it, up to a byte
// budget, and answers GetLog for them from memory. Without it every
// entry is read back from the log store after it is written: on a
// leader once per follower to send it (raft's replication reads the
// store), and on a follower once to apply it (raft's FSM loop reads
// committed entries by index); with raft-boltdb each read is a read
// transaction, a msgpack decode and a copy of the data (docs/performance.md).
//
// The cached *raft.Log values are the ones raft handed to StoreLogs; raft
// does not change an entry once it is stored, and GetLog copies the
// struct (its Data is shared, read-only, as raft's own LogCache does).
//
// raft.LogCache is not used because it bounds entries by count: an entry
// here is a whole produce batch (up to several MiB), so a count that
// covers a follower's lag at small batches holds hundreds of MiB at large
// ones. The budget in bytes bounds the memory whatever the batch size.
type recentLogs struct {
	raft.LogStore
	budget int
	mu     sync.RWMutex
	// logs holds entries of consecutive indexes, oldest first; bytes is
	// their cost against budget. Guarded by mu.
	logs  []*raft.Log
	bytes int
}

// CacheRecent wraps s with a cache of its newest entries, up to budget
// bytes (recentLogs); a budget of zero or less returns s itself.
// raft.MonotonicLogStore is kept if s has it. Every write must go
// through the cache: one made to s directly would leave stale entries in
// it.
func CacheRecent(s raft.LogStore, budget int) raft.LogStore {
	if budget <= 0 {
		return s
	}
	c := &recentLogs{LogStore: s, budget: budget}
	if m, ok := s.(raft.MonotonicLogStore); ok {
		return &recentMonotonicLogs{recentLogs: c, m: m}
	}
	return c
}

// GetLog implements raft.LogStore.
func (c *recentLogs) GetLog(index uint64, l *raft.Log) error {
	c.mu.RLock()
	if n := len(c.logs); n > 0 {
		if first := c.logs[0].Index; index >= first && index-first < uint64(n) {
			*l = *c.logs[index-first]
			c.mu.RUnlock()
			return nil
		}
	}
	c.mu.RUnlock()
	return c.LogStore.GetLog(index, l)
}

// StoreLog implements raft.LogStore.
func (c *recentLogs) StoreLog(l *raft.Log) error { return c.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore: the entries are cached once the
// store has them. A failed write empties the cache, as the store's
// contents are then unknown.
func (c *recentLogs) StoreLogs(logs []*raft.Log) error {
	if err := c.LogStore.StoreLogs(logs); err != nil {
		c.reset()
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range logs {
		if n := len(c.logs); n > 0 && c.logs[n-1].Index+1 != l.Index {
			c.resetLocked() // not the next index: keep the cache contiguous
		}
		c.logs = append(c.logs, l)
		c.bytes += len(l.Data) + len(l.Extensions) + recentLogOverhead
	}
	drop := 0
	for c.bytes > c.budget && drop < len(c.logs) {
		l := c.logs[drop]
		c.bytes -= len(l.Data) + len(l.Extensions) + recentLogOverhead
		drop++
	}
	clear(c.logs[:drop]) // the backing array must not keep them alive
	c.logs = c.logs[drop:]
	return nil
}

// DeleteRange implements raft.LogStore. The cache is emptied first: a
// follower truncating a conflicting suffix writes the new entries next,
// and a compaction removes entries older than any GetLog asks for.
func (c *recentLogs) DeleteRange(lo, hi uint64) error {
	c.reset()
	return c.LogStore.DeleteRange(lo, hi)
}

func (c *recentLogs) reset() {
	c.mu.Lock()
	c.resetLocked()
	c.mu.Unlock()
}

func (c *recentLogs) resetLocked() {
	clear(c.logs)
	c.logs, c.bytes = c.logs[:0], 0
}

// recentMonotonicLogs is recentLogs over a monotonic store.
type recentMonotonicLogs struct {
	*recentLogs
	m raft.MonotonicLogStore
}

// IsMonotonic implements raft.MonotonicLogStore.
func (c *recentMonotonicLogs) IsMonotonic() bool { return c.m.IsMonotonic() }
