package fsm

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"
)

// TestCleanerRunInSnapshot: each partition's last cleaner run survives a
// snapshot and restore; replayed commands that change nothing do not
// replace it, and runs of deleted topics are not kept.
func TestCleanerRunInSnapshot(t *testing.T) {
	ms := int64(1_700_000_000_000)
	now := ms * int64(time.Millisecond)
	cmds := [][]byte{
		mustJSON(t, CmdCreateTopic, now, CreateTopic{Name: "c", Partitions: 1, Config: map[string]string{ConfigSegmentBytes: "100"}}),
		mustJSON(t, CmdCreateTopic, now, CreateTopic{Name: "gone", Partitions: 1, Config: map[string]string{ConfigSegmentBytes: "100"}}),
	}
	for i := range 4 {
		for _, topic := range []string{"c", "gone"} {
			cmds = append(cmds, encodeAppend(now, Append{Topic: topic, Batches: []PartitionBatch{{Partition: 0, Batch: keyedBatch(t, ms, "k", fmt.Sprint(i))}}}))
		}
	}
	cmds = append(cmds,
		mustJSON(t, CmdTrim, now+1, Trim{Topic: "c", TopicIndex: 1, Partition: 0, Below: 2}),
		mustJSON(t, CmdTrim, now+2, Trim{Topic: "gone", TopicIndex: 2, Partition: 0, Below: 2}),
		mustJSON(t, CmdDeleteTopic, now+3, DeleteTopic{Name: "gone"}),
	)
	dir := t.TempDir()
	f, fatals := testFSM(t, dir)
	f.ApplyBatch(entries(cmds...))
	want, ok := f.LastCleanerRun("c", 1, 0)
	if !ok || want.Action != "trim" || want.TimeNanos != now+1 || want.BytesDeleted <= 0 {
		t.Fatalf("run before the snapshot %+v %v", want, ok)
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := persist(t, snap)
	f.Close()

	f2, fatals2 := testFSM(t, dir)
	if err := f2.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if got, ok := f2.LastCleanerRun("c", 1, 0); !ok || got != want {
		t.Fatalf("restored run %+v %v, want %+v", got, ok, want)
	}
	if got, ok := f2.LastCleanerRun("gone", 2, 0); ok {
		t.Fatalf("run of a deleted topic restored: %+v", got)
	}
	// Raft replays the entries after the snapshot's index; here the trim
	// again, which deletes nothing now.
	res := f2.apply(Entry{Index: uint64(len(cmds) + 1), Command: true,
		Data: mustJSON(t, CmdTrim, now+5, Trim{Topic: "c", TopicIndex: 1, Partition: 0, Below: 2})})
	if r, ok := res.(TrimResult); !ok || r.Segments != 0 {
		t.Fatalf("replayed trim %#v", res)
	}
	if got, _ := f2.LastCleanerRun("c", 1, 0); got != want {
		t.Fatalf("a trim that deleted nothing replaced the run: %+v", got)
	}
	if len(*fatals)+len(*fatals2) > 0 {
		t.Fatal(*fatals, *fatals2)
	}

	// A manifest of an unknown cleaner version is refused.
	bad := bytes.Replace(sink.Bytes(), []byte(`"cleaner":{"version":1`), []byte(`"cleaner":{"version":9`), 1)
	if bytes.Equal(bad, sink.Bytes()) {
		t.Fatal("no cleaner section in the manifest")
	}
	f3, _ := testFSM(t, dir)
	if err := f3.Restore(io.NopCloser(bytes.NewReader(bad))); err == nil {
		t.Fatal("restored a cleaner manifest of an unknown version")
	}
}
