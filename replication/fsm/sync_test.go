package fsm

import (
	"path/filepath"
	"testing"

	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/log/logtest"
)

// TestSyncDirty: SyncDirty fsyncs exactly the partition logs with at
// least minBytes appended since their last sync, once each; a snapshot's
// Persist syncs what is left.
func TestSyncDirty(t *testing.T) {
	fsys := logtest.Wrap(logtest.NewMemFS())
	f := New(Config{Dir: filepath.Join(t.TempDir(), "topics"), Log: log.Options{Sync: log.SyncNone, FS: fsys}, Logger: testLogger()})
	t.Cleanup(func() { f.Close() })
	a := &applier{t: t, f: f}
	a.apply(createCmd(t, "t", 2, 1))
	append0 := appendCmd(t, 2, "t", 0, "a", "b", "c")
	a.apply(append0)
	p0, err := f.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	n := p0.unsynced.Load()
	if n == 0 {
		t.Fatal("an append counted no unsynced bytes")
	}

	steps := []struct {
		name      string
		minBytes  int64
		wantSyncs int
	}{
		{name: "below the bound", minBytes: n + 1, wantSyncs: 0},
		{name: "at the bound: partition 0 only", minBytes: n, wantSyncs: 1},
		{name: "nothing new", minBytes: 0, wantSyncs: 0},
	}
	for _, s := range steps {
		before := fsys.Syncs()
		if err := f.SyncDirty(s.minBytes); err != nil {
			t.Fatalf("%s: SyncDirty: %v", s.name, err)
		}
		if got := fsys.Syncs() - before; got != s.wantSyncs {
			t.Fatalf("%s: %d fsyncs, want %d", s.name, got, s.wantSyncs)
		}
	}

	// An append after the sync is left to the snapshot.
	a.apply(appendCmd(t, 3, "t", 1, "d"))
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	before := fsys.Syncs()
	if err := snap.Persist(discard{}); err != nil {
		t.Fatal(err)
	}
	if got := fsys.Syncs() - before; got != 1 {
		t.Fatalf("Persist: %d fsyncs, want 1 (partition 1's append)", got)
	}
	if err := f.SyncDirty(0); err != nil || fsys.Syncs() != before+1 {
		t.Fatalf("SyncDirty after Persist: err %v, %d more fsyncs, want none", err, fsys.Syncs()-before-1)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
