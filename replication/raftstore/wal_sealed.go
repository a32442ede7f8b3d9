package raftstore

import (
	"sync"

	waltypes "github.com/hashicorp/raft-wal/types"
)

// releaseSealed wraps raft-wal's segment filer so that a segment's writer
// is let go of once the segment is sealed, and the segment is read
// through a reader opened afresh instead.
//
// raft-wal's segment writer builds each StoreLogs batch in a commit
// buffer that it keeps for its lifetime, grown to the largest batch the
// segment took (a power of two from 64 KiB: 8 MiB for a batch of four
// 1 MiB produce entries, 64 MiB for one of a 40 MiB call). After the
// segment is sealed, raft-wal keeps that writer as the segment's reader
// until the segment is truncated away or the process restarts, so every
// segment Raft still holds (all those since the last snapshot, plus the
// trailing entries) pins one such buffer. docs/performance.md ("Memory")
// has the figures. A reader opened on the sealed file holds no buffer of
// its own: it reads the on-disk index block and the frame it is asked
// for, as raft-wal's readers of sealed segments do after a restart.
func releaseSealed(f waltypes.SegmentFiler) waltypes.SegmentFiler {
	return &sealReleasingFiler{SegmentFiler: f}
}

type sealReleasingFiler struct {
	waltypes.SegmentFiler
}

// Create implements waltypes.SegmentFiler.
func (f *sealReleasingFiler) Create(info waltypes.SegmentInfo) (waltypes.SegmentWriter, error) {
	w, err := f.SegmentFiler.Create(info)
	if err != nil {
		return nil, err
	}
	return &sealReleasingWriter{filer: f.SegmentFiler, info: info, w: w}, nil
}

// RecoverTail implements waltypes.SegmentFiler.
func (f *sealReleasingFiler) RecoverTail(info waltypes.SegmentInfo) (waltypes.SegmentWriter, error) {
	w, err := f.SegmentFiler.RecoverTail(info)
	if err != nil {
		return nil, err
	}
	return &sealReleasingWriter{filer: f.SegmentFiler, info: info, w: w}, nil
}

// sealReleasingWriter is a segment's writer until the segment is sealed,
// then a reader of the sealed file.
//
// raft-wal calls Append, Sealed and ForceSeal from one goroutine at a time
// (under its write lock), and GetLog, LastIndex and Close from any.
type sealReleasingWriter struct {
	filer waltypes.SegmentFiler
	info  waltypes.SegmentInfo

	// mu guards w and r: GetLog holds it for reading, so the writer is not
	// closed under a read; release swaps them under the write lock.
	mu sync.RWMutex
	// w is the segment's writer while the segment is open (and sealed but
	// not yet reopened); nil once released.
	w waltypes.SegmentWriter
	// r is the reader of the sealed file once released.
	r waltypes.SegmentReader
	// indexStart is where the sealed segment's index block starts, and
	// last its last index, once released. Set with r.
	indexStart, last uint64
}

// writer is the writer, or nil once released. Append, Sealed and ForceSeal
// may read it without mu: only they change it, and raft-wal does not call
// them concurrently.
func (s *sealReleasingWriter) writer() waltypes.SegmentWriter { return s.w }

// Append implements waltypes.SegmentWriter.
func (s *sealReleasingWriter) Append(entries []waltypes.LogEntry) error {
	w := s.writer()
	if w == nil {
		return waltypes.ErrSealed
	}
	return w.Append(entries)
}

// Sealed implements waltypes.SegmentWriter: a segment that the last
// Append sealed is released here, since raft-wal calls Sealed after every
// Append.
func (s *sealReleasingWriter) Sealed() (bool, uint64, error) {
	w := s.writer()
	if w == nil {
		return true, s.indexStart, nil
	}
	sealed, indexStart, err := w.Sealed()
	if err != nil || !sealed {
		return sealed, indexStart, err
	}
	s.release(w, indexStart)
	return true, indexStart, nil
}

// ForceSeal implements waltypes.SegmentWriter.
func (s *sealReleasingWriter) ForceSeal() (uint64, error) {
	w := s.writer()
	if w == nil {
		return s.indexStart, nil
	}
	indexStart, err := w.ForceSeal()
	if err != nil {
		return 0, err
	}
	s.release(w, indexStart)
	return indexStart, nil
}

// release reopens the sealed segment for reading and closes its writer.
// The entries are durable by now (the sealing Append or ForceSeal synced
// the index block with them). If the file cannot be reopened the writer
// stays, as raft-wal would have kept it.
func (s *sealReleasingWriter) release(w waltypes.SegmentWriter, indexStart uint64) {
	info := s.info
	info.IndexStart = indexStart
	last := w.LastIndex()
	// A sealed segment's reader answers the indexes its info bounds;
	// raft-wal's state bounds them again (a truncated suffix) before it
	// asks.
	info.MaxIndex = last
	r, err := s.filer.Open(info)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.indexStart, s.last = indexStart, last
	s.r = r
	s.w = nil
	s.mu.Unlock()
	// The writer's file is only read through from here on: closing it
	// drops the writer's last reference, and its buffer with it.
	_ = w.Close()
}

// LastIndex implements waltypes.SegmentWriter.
func (s *sealReleasingWriter) LastIndex() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.w != nil {
		return s.w.LastIndex()
	}
	return s.last
}

// GetLog implements waltypes.SegmentReader.
func (s *sealReleasingWriter) GetLog(idx uint64) (*waltypes.PooledBuffer, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.w != nil {
		return s.w.GetLog(idx)
	}
	return s.r.GetLog(idx)
}

// Close implements io.Closer.
func (s *sealReleasingWriter) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w != nil {
		return s.w.Close()
	}
	return s.r.Close()
}
