package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
)

// TestChooseLogStore: a data dir keeps the store its Raft log is in; an
// empty one takes the asked store, else the default; asking for the other
// store of a data dir with a log is refused.
func TestChooseLogStore(t *testing.T) {
	for _, tc := range []struct {
		want, detected, store string
		err                   bool
	}{
		{"", "", DefaultLogStore, false},
		{LogStoreBoltDB, "", LogStoreBoltDB, false},
		{LogStoreWAL, "", LogStoreWAL, false},
		{"", LogStoreBoltDB, LogStoreBoltDB, false},
		{"", LogStoreWAL, LogStoreWAL, false},
		{LogStoreBoltDB, LogStoreBoltDB, LogStoreBoltDB, false},
		{LogStoreWAL, LogStoreWAL, LogStoreWAL, false},
		{LogStoreWAL, LogStoreBoltDB, "", true},
		{LogStoreBoltDB, LogStoreWAL, "", true},
	} {
		store, reason, err := chooseLogStore(tc.want, tc.detected)
		if tc.err {
			if !errors.Is(err, ErrLogStoreMismatch) {
				t.Errorf("want %q, data dir's %q: %v, want ErrLogStoreMismatch", tc.want, tc.detected, err)
			}
			continue
		}
		if err != nil || store != tc.store || reason == "" {
			t.Errorf("want %q, data dir's %q: %q (%q), %v; want %q", tc.want, tc.detected, store, reason, err, tc.store)
		}
	}
}

// TestWALTailTruncateRestart: Raft deletes a suffix of its log (a
// follower's entries that conflict with a new leader's) and the node
// restarts: the entries before the suffix are read back, and the log
// takes entries after them again.
func TestWALTailTruncateRestart(t *testing.T) {
	raftDir := t.TempDir()
	hlog := hclog.NewNullLogger()
	w, err := openWAL(raftDir, 0, hlog, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := func(w raft.LogStore, from, to uint64, term uint64) {
		t.Helper()
		for i := from; i <= to; i++ {
			if err := w.StoreLogs([]*raft.Log{{Index: i, Term: term, Type: raft.LogCommand, Data: fmt.Appendf(nil, "e%d", i)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	store(w, 1, 10, 1)
	if err := w.DeleteRange(8, 10); err != nil {
		t.Fatal(err)
	}
	store(w, 8, 9, 2)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w, err = openWAL(raftDir, 0, hlog, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := uint64(1); i <= 9; i++ {
		var l raft.Log
		if err := w.GetLog(i, &l); err != nil || string(l.Data) != fmt.Sprintf("e%d", i) {
			t.Fatalf("entry %d after the restart: %q, %v", i, l.Data, err)
		}
	}
	store(w, 10, 12, 2)
}

// TestWALInterruptedRotation: a crash between the append that seals a
// full segment and the rotation that records the seal leaves a tail that
// is sealed on disk but open in raft-wal's metadata. The state is made by
// hand from a WAL that rotated (its later segments dropped, the seal
// taken out of the metadata). Reopened, the log reads every entry back
// and takes new ones; without finishInterruptedRotation every append
// failed with "segment is sealed".
func TestWALInterruptedRotation(t *testing.T) {
	raftDir := t.TempDir()
	hlog := hclog.NewNullLogger()
	w, err := openWAL(raftDir, MinWALSegmentBytes, hlog, nil)
	if err != nil {
		t.Fatal(err)
	}
	entry := func(i uint64) *raft.Log {
		return &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: append(fmt.Appendf(nil, "e%d:", i), make([]byte, 4000)...)}
	}
	for i := uint64(1); i <= 40; i++ { // about 160 KB: two rotations at 64 KiB
		if err := w.StoreLogs([]*raft.Log{entry(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(raftDir, walDirName)
	var meta metadb.BoltMetaDB
	state, err := meta.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(state.Segments) < 2 || state.Segments[0].SealTime.IsZero() {
		t.Fatalf("the WAL did not rotate: %+v", state.Segments)
	}
	sealed := state.Segments[0]
	for _, later := range state.Segments[1:] {
		if err := os.Remove(filepath.Join(dir, segment.FileName(later))); err != nil {
			t.Fatal(err)
		}
	}
	last := sealed.MaxIndex
	sealed.SealTime, sealed.IndexStart, sealed.MaxIndex = time.Time{}, 0, 0
	state.Segments = state.Segments[:1]
	state.Segments[0] = sealed
	state.NextSegmentID = sealed.ID + 1
	if err := meta.CommitState(state); err != nil {
		t.Fatal(err)
	}
	if err := meta.Close(); err != nil {
		t.Fatal(err)
	}

	w, err = openWAL(raftDir, MinWALSegmentBytes, hlog, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.StoreLogs([]*raft.Log{entry(last + 1)}); err != nil {
		t.Fatalf("append after the interrupted rotation: %v", err)
	}
	for i := uint64(1); i <= last+1; i++ {
		var l raft.Log
		if err := w.GetLog(i, &l); err != nil || !bytes.HasPrefix(l.Data, fmt.Appendf(nil, "e%d:", i)) {
			t.Fatalf("entry %d: %.8q, %v", i, l.Data, err)
		}
	}
}
