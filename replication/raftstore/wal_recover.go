package raftstore

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	waltypes "github.com/hashicorp/raft-wal/types"
)

// finishInterruptedRotation completes, before raft-wal opens the WAL in
// dir, a segment rotation that a crash interrupted.
//
// raft-wal seals a full tail segment inside the append that fills it (an
// index block and a commit frame, fsynced with the entries), and records
// the seal in its metadata afterwards, from a goroutine that also starts
// the next segment. A process killed between the two leaves a tail that
// is sealed on disk but open in the metadata; raft-wal (v0.4.1) recovers
// it as the tail and refuses every later append with "segment is sealed",
// so the node can never write its Raft log again. This does the
// metadata step the rotation would have done: the tail is recorded as
// sealed where its index block starts, and a new tail segment after it is
// recorded too (raft-wal's Open creates its missing file; left to itself,
// Open would start a tail at index 1 over the sealed segment). Every entry the sealed segment holds was committed
// by the sealing append, so nothing is dropped. A seal whose index block
// does not read back (its commit torn) is left as it is.
func finishInterruptedRotation(dir string, vfs waltypes.VFS, segmentBytes int, now time.Time) (bool, error) {
	var meta metadb.BoltMetaDB
	state, err := meta.Load(dir)
	if err != nil {
		return false, fmt.Errorf("read raft wal metadata: %w", err)
	}
	defer meta.Close()
	n := len(state.Segments)
	if n == 0 || !state.Segments[n-1].SealTime.IsZero() {
		return false, nil
	}
	tail := state.Segments[n-1]
	filer := segment.NewFiler(dir, vfs)
	w, err := filer.RecoverTail(tail)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil // raft-wal creates a missing tail file itself
	}
	if err != nil {
		return false, fmt.Errorf("recover raft wal tail segment %d: %w", tail.ID, err)
	}
	sealed, indexStart, err := w.Sealed()
	last := w.LastIndex()
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("recover raft wal tail segment %d: %w", tail.ID, err)
	}
	if !sealed || last < tail.BaseIndex {
		return false, nil
	}
	tail.SealTime = now
	tail.IndexStart = indexStart
	tail.MaxIndex = last
	// The sealed segment must read back through its index block before
	// the metadata says it is sealed.
	r, err := filer.Open(tail)
	if err != nil {
		return false, nil
	}
	buf, err := r.GetLog(last)
	if err == nil {
		buf.Close()
	}
	if cerr := r.Close(); err != nil || cerr != nil {
		return false, nil
	}
	state.Segments[n-1] = tail
	state.Segments = append(state.Segments, waltypes.SegmentInfo{
		ID:         state.NextSegmentID,
		BaseIndex:  last + 1,
		MinIndex:   last + 1,
		Codec:      tail.Codec,
		CreateTime: now,
		SizeLimit:  uint32(segmentBytes),
	})
	state.NextSegmentID++
	if err := meta.CommitState(state); err != nil {
		return false, fmt.Errorf("record the seal of raft wal segment %d: %w", tail.ID, err)
	}
	return true, nil
}
