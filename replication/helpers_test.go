package replication

// Helpers for tests of nodes and of the adapter over the state machine;
// package fsm's tests have their own.

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/replication/fsm"
)

// testFSM is a state machine over a temp dir whose fatal handler records
// the error.
func testFSM(t *testing.T, dir string, fetcher fsm.SegmentFetcher) (*fsm.FSM, *[]error) {
	t.Helper()
	var fatals []error
	f := fsm.New(fsm.Config{Dir: filepath.Join(dir, "topics"), Log: log.Options{Sync: log.SyncNone}, Logger: testLogger(),
		Fatal: func(err error) { fatals = append(fatals, err) }, Self: "b", Fetcher: fetcher})
	t.Cleanup(func() { f.Close() })
	return f, &fatals
}

func mustJSON(t *testing.T, ct fsm.CommandType, now int64, body any) []byte {
	t.Helper()
	d, err := fsm.EncodeJSON(ct, now, body)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// entries is a script of commands, applied as Raft entries 1..n.
func entries(cmds ...[]byte) []fsm.Entry {
	out := make([]fsm.Entry, len(cmds))
	for i, c := range cmds {
		out[i] = fsm.Entry{Index: uint64(i + 1), Command: true, Data: c}
	}
	return out
}

// snapshotBytes takes f's snapshot and returns it as Restore reads it.
func snapshotBytes(t *testing.T, f *fsm.FSM) []byte {
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

func testLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func mustBatch(t *testing.T, values ...string) []byte { return mustBatchB(t, values...) }

func mustBatchB(t testing.TB, values ...string) []byte {
	t.Helper()
	recs := make([]batch.Record, len(values))
	for i, v := range values {
		recs[i] = batch.Record{Timestamp: 1_700_000_000_000 + int64(i), Value: []byte(v)}
	}
	b, err := batch.Build(recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readAll returns every record value of a partition in offset order.
func readAll(t *testing.T, f *fsm.FSM, topic string, p int32) []string {
	t.Helper()
	part, err := f.Partition(topic, p)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for off := part.Log().StartOffset(); off < part.Log().EndOffset(); {
		data, err := part.Log().Read(off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := batch.Records(data, off, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Offset != int64(len(out)) {
				t.Fatalf("record at offset %d, want %d", r.Offset, len(out))
			}
			out = append(out, string(r.Value))
		}
		off = recs[len(recs)-1].Offset + 1
	}
	return out
}

func keyedBatch(t testing.TB, ts int64, kv ...string) []byte {
	t.Helper()
	var recs []batch.Record
	for i := 0; i < len(kv); i += 2 {
		r := batch.Record{Timestamp: ts, Key: []byte(kv[i])}
		if kv[i+1] != "<nil>" {
			r.Value = []byte(kv[i+1])
		}
		recs = append(recs, r)
	}
	b, err := batch.Build(recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// liveKV lists a partition's records as "offset:key=value".
func liveKV(t *testing.T, f *fsm.FSM, topic string) []string {
	t.Helper()
	p, err := f.Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for off := p.Log().StartOffset(); off < p.Log().EndOffset(); {
		data, err := p.Log().Read(off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := batch.Records(data, off, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			v := string(r.Value)
			if r.Value == nil {
				v = "<nil>"
			}
			out = append(out, fmt.Sprintf("%d:%s=%s", r.Offset, r.Key, v))
		}
		for rest := data; len(rest) > 0; {
			info, err := batch.Peek(rest)
			if err != nil {
				t.Fatal(err)
			}
			off = info.NextOffset()
			rest = rest[info.Length:]
		}
	}
	return out
}

const qnow = int64(1_700_000_000_000_000_000)

// jobBatch builds records with values and, for values "late:*", a deadline
// header at qnow+1s.
func jobBatch(t *testing.T, values ...string) []byte {
	t.Helper()
	recs := make([]batch.Record, len(values))
	for i, v := range values {
		recs[i] = batch.Record{Timestamp: qnow / 1e6, Key: []byte("k-" + v), Value: []byte(v), Headers: []batch.Header{{Key: "job", Value: []byte(v)}}}
		if strings.HasPrefix(v, "late:") {
			recs[i].Headers = append(recs[i].Headers, batch.Header{Key: "deadline", Value: []byte(fmt.Sprint((qnow + int64(time.Second)) / 1e6))})
		}
	}
	b, err := batch.Build(recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
