// Package fsmtest holds what the tests of package replication and its
// sub-packages need of a state machine in process: one over a temporary
// directory, commands and scripts of entries, snapshots, reads. Test
// support: imported only by tests.
package fsmtest

import (
	"bytes"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/recordtest"
)

// New is a state machine over a temp dir whose fatal handler records
// the error; it is closed when the test ends.
func New(t *testing.T, dir string, fetcher fsm.SegmentFetcher) (*fsm.FSM, *[]error) {
	t.Helper()
	var fatals []error
	f := fsm.New(fsm.Config{Dir: filepath.Join(dir, "topics"), Log: log.Options{Sync: log.SyncNone}, Logger: Logger(),
		Fatal: func(err error) { fatals = append(fatals, err) }, Self: "b", Fetcher: fetcher})
	t.Cleanup(func() { f.Close() })
	return f, &fatals
}

// Command encodes a JSON command, failing the test on an error.
func Command(t *testing.T, ct fsm.CommandType, now int64, body any) []byte {
	t.Helper()
	d, err := fsm.EncodeJSON(ct, now, body)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Entries is a script of commands, applied as Raft entries 1..n.
func Entries(cmds ...[]byte) []fsm.Entry {
	out := make([]fsm.Entry, len(cmds))
	for i, c := range cmds {
		out[i] = fsm.Entry{Index: uint64(i + 1), Command: true, Data: c}
	}
	return out
}

// Snapshot takes f's snapshot and returns it as Restore reads it.
func Snapshot(t *testing.T, f *fsm.FSM) []byte {
	t.Helper()
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	var b bytes.Buffer
	if err := s.Persist(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Logger discards what it is given.
func Logger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// ReadAll returns every record value of a partition in offset order.
func ReadAll(t *testing.T, f *fsm.FSM, topic string, p int32) []string {
	t.Helper()
	part, err := f.Partition(topic, p)
	if err != nil {
		t.Fatal(err)
	}
	return recordtest.Values(t, part.Log())
}
