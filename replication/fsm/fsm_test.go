package fsm

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/replication/internal/recordtest"
)

func testLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testFSM is an FSM over a temp dir whose fatal handler records the error.
func testFSM(t *testing.T, dir string) (*FSM, *[]error) {
	t.Helper()
	var fatals []error
	f := New(Config{Dir: filepath.Join(dir, "topics"), Log: log.Options{Sync: log.SyncNone}, Logger: testLogger(), Fatal: func(err error) { fatals = append(fatals, err) }})
	t.Cleanup(func() { f.Close() })
	return f, &fatals
}

func mustBatch(t *testing.T, values ...string) []byte { return recordtest.Batch(t, values...) }

func createCmd(t *testing.T, name string, parts int32, now int64) []byte {
	t.Helper()
	d, err := encodeJSONCommand(CmdCreateTopic, now, CreateTopic{Name: name, Partitions: parts})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// apply applies one committed entry and returns its result.
func (f *FSM) apply(e Entry) any { return f.ApplyBatch([]Entry{e})[0] }

// entries is a script of commands, applied as Raft entries 1..n.
func entries(cmds ...[]byte) []Entry {
	out := make([]Entry, len(cmds))
	for i, c := range cmds {
		out[i] = Entry{Index: uint64(i + 1), Command: true, Data: c}
	}
	return out
}

// readAll returns every record value of a partition in offset order.
func readAll(t *testing.T, f *FSM, topic string, p int32) []string {
	t.Helper()
	part, err := f.Partition(topic, p)
	if err != nil {
		t.Fatal(err)
	}
	return recordtest.Values(t, part.Log())
}

func TestApplyScript(t *testing.T) {
	now := int64(1_700_000_000_000_000_000)
	f, fatals := testFSM(t, t.TempDir())
	script := entries(
		createCmd(t, "orders", 2, now),
		encodeAppend(now+1, Append{Topic: "orders", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, "a", "b")}, {Partition: 1, Batch: mustBatch(t, "x")}}}),
		encodeAppend(now+2, Append{Topic: "orders", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, "c")}}}),
		createCmd(t, "orders", 1, now+3), // exists
		encodeAppend(now+4, Append{Topic: "nope", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, "z")}}}),
		encodeAppend(now+5, Append{Topic: "orders", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, "y")}, {Partition: 2, Batch: mustBatch(t, "z")}}}), // bad partition: nothing written
		encodeAppend(now+6, Append{Topic: "orders", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, "y")}, {Partition: 0, Batch: mustBatch(t, "z")}}}), // twice
		encodeAppend(now+7, Append{Topic: "orders", Batches: []PartitionBatch{{Partition: 1, Batch: []byte("garbage that is not a batch at all, long enough for a header.......")}}}),
	)
	res := f.ApplyBatch(script)
	wantErr := []error{nil, nil, nil, backend.ErrTopicExists, backend.ErrUnknownTopic, backend.ErrUnknownPartition, backend.ErrInvalidArgument, backend.ErrInvalidArgument}
	for i, r := range res {
		err, _ := r.(error)
		if wantErr[i] == nil && err != nil || wantErr[i] != nil && !errors.Is(err, wantErr[i]) {
			t.Errorf("entry %d: result %v, want %v", i+1, r, wantErr[i])
		}
	}
	if got := res[1].(AppendResult).BaseOffsets; fmt.Sprint(got) != "[0 0]" {
		t.Errorf("base offsets %v", got)
	}
	if got := res[2].(AppendResult).BaseOffsets; fmt.Sprint(got) != "[2]" {
		t.Errorf("base offsets %v", got)
	}
	if got := readAll(t, f, "orders", 0); fmt.Sprint(got) != "[a b c]" {
		t.Errorf("partition 0 = %v", got)
	}
	if got := readAll(t, f, "orders", 1); fmt.Sprint(got) != "[x]" {
		t.Errorf("partition 1 = %v", got)
	}
	if len(*fatals) != 0 {
		t.Fatalf("fatal errors: %v", *fatals)
	}
	if f.AppliedIndex() != uint64(len(script)) {
		t.Errorf("applied index %d", f.AppliedIndex())
	}
}

// TestReplayIsIdempotent re-applies the whole Raft log to a fresh FSM over
// the same directory, as Raft does after a restart without a snapshot:
// nothing may be appended twice.
func TestReplayIsIdempotent(t *testing.T) {
	dir := t.TempDir()
	now := int64(1_700_000_000_000_000_000)
	script := entries(
		createCmd(t, "t", 1, now),
		encodeAppend(now, Append{Topic: "t", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, "1", "2")}}}),
		encodeAppend(now, Append{Topic: "t", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, "3")}}}),
		mustJSON(t, CmdDeleteTopic, now, DeleteTopic{Name: "t"}),
		createCmd(t, "t", 1, now),
		encodeAppend(now, Append{Topic: "t", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, "new")}}}),
	)
	f1, _ := testFSM(t, dir)
	f1.ApplyBatch(script)
	if got := readAll(t, f1, "t", 0); fmt.Sprint(got) != "[new]" {
		t.Fatalf("first run: %v", got)
	}
	f1.Close()
	for run := 0; run < 3; run++ {
		f2, fatals := testFSM(t, dir)
		// Apply one entry at a time too, as a follower catching up would.
		for _, e := range script {
			f2.apply(e)
		}
		if got := readAll(t, f2, "t", 0); fmt.Sprint(got) != "[new]" {
			t.Fatalf("replay %d: %v", run, got)
		}
		if len(*fatals) != 0 {
			t.Fatal(*fatals)
		}
		f2.Close()
	}
}

func mustJSON(t *testing.T, ct CommandType, now int64, body any) []byte {
	t.Helper()
	d, err := encodeJSONCommand(ct, now, body)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestApplyDeterministic applies the same script on two FSMs and requires
// byte-identical segment files, including size- and age-based rolls.
func TestApplyDeterministic(t *testing.T) {
	now := int64(1_700_000_000_000_000_000)
	cmds := [][]byte{mustJSON(t, CmdCreateTopic, now, CreateTopic{Name: "d", Partitions: 3, Config: map[string]string{ConfigSegmentBytes: "4096", ConfigSegmentMs: "1000"}})}
	for i := 0; i < 200; i++ {
		// Time jumps back now and then: the FSM keeps it monotonic.
		ts := now + int64(i)*int64(50*time.Millisecond)
		if i%17 == 0 {
			ts -= int64(time.Second)
		}
		cmds = append(cmds, encodeAppend(ts, Append{Topic: "d", Batches: []PartitionBatch{{Partition: int32(i % 3), Batch: mustBatch(t, fmt.Sprintf("v%03d", i), "padding-padding-padding-padding")}}}))
	}
	sums := make([]string, 2)
	for n := range sums {
		dir := t.TempDir()
		f, _ := testFSM(t, dir)
		f.ApplyBatch(entries(cmds...))
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		sums[n] = treeDigest(t, filepath.Join(dir, "topics"), ".log")
	}
	if sums[0] != sums[1] {
		t.Fatalf("replicas differ:\n%s\n---\n%s", sums[0], sums[1])
	}
	if c := bytes.Count([]byte(sums[0]), []byte(".log")); c < 6 {
		t.Fatalf("expected several segments per partition, got %d files:\n%s", c, sums[0])
	}
}

// treeDigest lists files with the suffix under root with their SHA-256.
func treeDigest(t *testing.T, root, suffix string) string {
	t.Helper()
	var lines []string
	err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || filepath.Ext(p) != suffix {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		lines = append(lines, fmt.Sprintf("%s %x", rel, sha256.Sum256(b)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return fmt.Sprint(lines)
}

func TestUnknownCommandStops(t *testing.T) {
	f, fatals := testFSM(t, t.TempDir())
	res := f.ApplyBatch(entries([]byte{99, 1, 0, 0, 0, 0, 0, 0, 0, 0}, createCmd(t, "t", 1, 1)))
	if len(*fatals) != 1 || !errors.Is((*fatals)[0], backend.ErrUnknownCommand) {
		t.Fatalf("fatals = %v", *fatals)
	}
	// Nothing is applied after a fatal error.
	if err, _ := res[1].(error); !errors.Is(err, backend.ErrStopped) {
		t.Fatalf("second result %v", res[1])
	}
	if _, err := f.Topic("t"); err == nil {
		t.Fatal("topic created after the node stopped")
	}
}

func TestDecodeCommandHostile(t *testing.T) {
	for name, data := range map[string][]byte{
		"empty":            nil,
		"short":            {3, 1},
		"bad version":      append([]byte{3, 9}, make([]byte, 8)...),
		"append truncated": append(encodeHeader(nil, CmdAppend, 0), 0x05, 'a'),
		"huge count":       append(append(encodeHeader(nil, CmdAppend, 0), 1, 't'), 0xff, 0xff, 0xff, 0xff, 0x0f),
		"batch too long":   append(append(encodeHeader(nil, CmdAppend, 0), 1, 't', 1, 0), 0xff, 0xff, 0x03),
		"bad json":         append(encodeHeader(nil, CmdCreateTopic, 0), '{'),
	} {
		if _, err := decodeCommandWith(data, &keyScratch{}); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}
