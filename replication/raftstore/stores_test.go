package raftstore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
)

func testLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// openStores opens the stores of o (with a quiet logger) and closes them
// when t ends, unless the test closed them first.
func openStores(t *testing.T, o Options) *Stores {
	t.Helper()
	o.Logger = testLogger()
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// storeEntries stores entries from..to, tagged with tag, in s.
func storeEntries(t *testing.T, s raft.LogStore, from, to uint64, tag string) {
	t.Helper()
	for i := from; i <= to; i++ {
		if err := s.StoreLog(&raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: fmt.Appendf(nil, "%s%d", tag, i)}); err != nil {
			t.Fatalf("store %d: %v", i, err)
		}
	}
}

// checkEntries reads entries from..to back from s and checks their tag.
func checkEntries(t *testing.T, s raft.LogStore, from, to uint64, tag string) {
	t.Helper()
	for i := from; i <= to; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil || string(l.Data) != fmt.Sprintf("%s%d", tag, i) {
			t.Fatalf("entry %d: %q, %v; want %s%d", i, l.Data, err, tag, i)
		}
	}
}

func hasWAL(t *testing.T, dir string) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(dir, walDirName))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		ok   bool
	}{
		{name: "zero value in memory", opts: Options{InMemory: true}, ok: true},
		{name: "a dir", opts: Options{Dir: "d"}, ok: true},
		{name: "no dir", opts: Options{}},
		{name: "each log store", opts: Options{Dir: "d", LogStore: LogStoreBoltDB}, ok: true},
		{name: "unknown log store", opts: Options{Dir: "d", LogStore: "rocks"}},
		{name: "smallest segment", opts: Options{Dir: "d", WALSegmentBytes: MinWALSegmentBytes}, ok: true},
		{name: "largest segment", opts: Options{Dir: "d", WALSegmentBytes: MaxWALSegmentBytes}, ok: true},
		{name: "segment too small", opts: Options{Dir: "d", WALSegmentBytes: MinWALSegmentBytes - 1}},
		{name: "segment too large", opts: Options{Dir: "d", WALSegmentBytes: MaxWALSegmentBytes + 1}},
		{name: "segment size checked in memory too", opts: Options{InMemory: true, WALSegmentBytes: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			if tc.ok && err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if !tc.ok && !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("Validate: %v, want ErrInvalidOptions", err)
			}
		})
	}
}

// TestOpenKeepsLogStore: a directory opened on either store keeps its
// entries across an Open that names no store, holds its log where it
// said (a WAL directory, or entries in raft.db), and refuses an Open that
// names the other store without changing anything.
func TestOpenKeepsLogStore(t *testing.T) {
	for _, tc := range []struct{ store, other string }{
		{store: LogStoreBoltDB, other: LogStoreWAL},
		{store: LogStoreWAL, other: LogStoreBoltDB},
	} {
		t.Run(tc.store, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "raft")
			s := openStores(t, Options{Dir: dir, LogStore: tc.store})
			storeEntries(t, s.Logs, 1, 5, "e")
			if err := s.Stable.SetUint64([]byte("CurrentTerm"), 3); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if got := hasWAL(t, dir); got != (tc.store == LogStoreWAL) {
				t.Fatalf("WAL directory present %v", got)
			}

			if s, err := Open(Options{Dir: dir, LogStore: tc.other, Logger: testLogger()}); !errors.Is(err, ErrLogStoreMismatch) {
				if err == nil {
					s.Close()
				}
				t.Fatalf("Open of a %s dir asking for %s: %v, want ErrLogStoreMismatch", tc.store, tc.other, err)
			}
			if got := hasWAL(t, dir); got != (tc.store == LogStoreWAL) {
				t.Fatalf("the refused Open changed the dir: WAL directory present %v", got)
			}

			s = openStores(t, Options{Dir: dir})
			checkEntries(t, s.Logs, 1, 5, "e")
			if term, err := s.Stable.GetUint64([]byte("CurrentTerm")); err != nil || term != 3 {
				t.Fatalf("term after reopening: %d, %v", term, err)
			}
		})
	}
}

// TestOpenBothLogs: a directory with entries in raft.db and a WAL
// directory too is refused.
func TestOpenBothLogs(t *testing.T) {
	dir := t.TempDir()
	s := openStores(t, Options{Dir: dir, LogStore: LogStoreBoltDB})
	storeEntries(t, s.Logs, 1, 2, "e")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, walDirName), 0o755); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(Options{Dir: dir, Logger: testLogger()}); !errors.Is(err, ErrLogStoreMismatch) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Open: %v, want ErrLogStoreMismatch", err)
	}
}

// TestOpenSeveral: the stores of several Raft groups are open at once in
// one process, each in its own directory and on its own log store, and
// none sees another's entries.
func TestOpenSeveral(t *testing.T) {
	root := t.TempDir()
	groups := []struct {
		dir, store string
	}{
		{dir: filepath.Join(root, "g0", "raft"), store: LogStoreWAL},
		{dir: filepath.Join(root, "g1", "raft"), store: LogStoreBoltDB},
		{dir: filepath.Join(root, "g2", "raft"), store: LogStoreWAL},
	}
	stores := make([]*Stores, len(groups))
	for i, g := range groups {
		stores[i] = openStores(t, Options{Dir: g.dir, LogStore: g.store})
	}
	for i, s := range stores {
		storeEntries(t, s.Logs, 1, uint64(3+i), fmt.Sprintf("g%d.", i))
	}
	for i, s := range stores {
		checkEntries(t, s.Logs, 1, uint64(3+i), fmt.Sprintf("g%d.", i))
		if last, err := s.Logs.LastIndex(); err != nil || last != uint64(3+i) {
			t.Fatalf("group %d: last index %d, %v; want %d", i, last, err, 3+i)
		}
	}
}

// TestOpenInMemory: in memory the log is also the stable store.
func TestOpenInMemory(t *testing.T) {
	s := openStores(t, Options{InMemory: true})
	if st, ok := s.Stable.(*raft.InmemStore); !ok || s.Logs != raft.LogStore(st) {
		t.Fatalf("log store %T is not the stable store", s.Logs)
	}
	storeEntries(t, s.Logs, 1, 3, "m")
	checkEntries(t, s.Logs, 1, 3, "m")
}
