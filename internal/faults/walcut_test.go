package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
)

// TestWALPowerCut: entries raft-wal stored (each StoreLogs fsyncs) survive
// a cut whole; with the syncs dropped, as on a disk that ignores fsync,
// entries are lost. The second half is the control: a cut that lost
// nothing there would be inert.
func TestWALPowerCut(t *testing.T) {
	for _, tc := range []struct {
		name string
		drop bool
	}{
		{"synced", false},
		{"syncs dropped", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			journal := filepath.Join(dir, "faults", "walcut.journal")
			walDir := filepath.Join(dir, "wal")
			pc, _, err := OpenWALPowerCut(journal)
			if err != nil {
				t.Fatal(err)
			}
			// Small segments, so the run rolls to new files too.
			w, meta := openTestWAL(t, walDir, pc, 4096)
			store := func(from, to uint64) {
				for i := from; i <= to; i++ {
					l := &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: fmt.Appendf(nil, "entry-%03d-%0200d", i, i)}
					if err := w.StoreLogs([]*raft.Log{l}); err != nil {
						t.Fatal(err)
					}
				}
			}
			store(1, 20)
			pc.DropSyncs = tc.drop
			store(21, 40)
			// The process dies: nothing is closed cleanly that would sync.
			w.Close()
			meta.Close()
			pc.Close()

			pc, rep, err := OpenWALPowerCut(journal)
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close()
			if tc.drop && rep.Bytes == 0 && rep.Files == 0 {
				t.Fatalf("cut nothing with the syncs dropped: %+v", rep)
			}
			if !tc.drop && (rep.Bytes != 0 || rep.Files != 0) {
				t.Fatalf("cut synced writes: %+v", rep)
			}
			w, meta = openTestWAL(t, walDir, pc, 4096)
			defer meta.Close()
			defer w.Close()
			last, err := w.LastIndex()
			if err != nil {
				t.Fatal(err)
			}
			// Entries intact from the first on.
			intact := uint64(0)
			for i := uint64(1); i <= last; i++ {
				var l raft.Log
				if err := w.GetLog(i, &l); err != nil || len(l.Data) < 9 || string(l.Data[:9]) != fmt.Sprintf("entry-%03d", i) {
					break
				}
				intact = i
			}
			if tc.drop {
				// A disk that ignores fsync loses entries raft-wal
				// acknowledged. How many is not defined: raft-wal's
				// metadata (bbolt, not cut) may name a segment sealed
				// whose index was cut, so entries synced before read wrong.
				if intact >= 40 {
					t.Fatalf("all 40 entries intact with the syncs dropped: the cut is inert (%+v)", rep)
				}
			} else if last != 40 || intact != 40 {
				t.Fatalf("last index %d, %d intact after a cut of synced writes, want 40", last, intact)
			}
			t.Logf("cut %+v; last index %d, %d intact", rep, last, intact)
		})
	}
}

func openTestWAL(t *testing.T, dir string, pc *WALPowerCut, segmentSize int) (*wal.WAL, *metadb.BoltMetaDB) {
	t.Helper()
	if err := mkdir(dir); err != nil {
		t.Fatal(err)
	}
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(dir, wal.WithLogger(hclog.NewNullLogger()), wal.WithMetaStore(meta),
		wal.WithSegmentFiler(segment.NewFiler(dir, pc.Wrap(walfs.New()))), wal.WithSegmentSize(segmentSize))
	if err != nil {
		meta.Close()
		t.Fatal(err)
	}
	return w, meta
}

func mkdir(dir string) error { return os.MkdirAll(dir, 0o755) }
