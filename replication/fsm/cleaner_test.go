package fsm

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/replication/internal/recordtest"
)

func keyedBatch(t testing.TB, ts int64, kv ...string) []byte {
	return recordtest.KeyedBatch(t, ts, kv...)
}

// liveKV lists a partition's records as "offset:key=value".
func liveKV(t *testing.T, f *FSM, topic string) []string {
	t.Helper()
	p, err := f.Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	return recordtest.KeyValues(t, p.Log())
}

// TestCleanerCommandsDeterministic applies the same script (appends, an
// alter of segment.bytes, a trim and a compaction) on two FSMs, and replays
// it on a restarted one: all hold byte-identical segments.
func TestCleanerCommandsDeterministic(t *testing.T) {
	ms := int64(1_700_000_000_000)
	now := ms * int64(time.Millisecond)
	cmds := [][]byte{mustJSON(t, CmdCreateTopic, now, CreateTopic{Name: "c", Partitions: 1, Config: map[string]string{ConfigCleanupPolicy: "compact,delete", ConfigSegmentBytes: "1000000"}})}
	// segment.bytes changes on apply: after the alter every batch rolls.
	cmds = append(cmds, mustJSON(t, CmdAlterTopic, now, AlterTopic{Name: "c", Config: map[string]string{ConfigSegmentBytes: "100"}}))
	for i := range 12 {
		v := fmt.Sprint("v", i)
		if i == 7 {
			v = "<nil>"
		}
		cmds = append(cmds, encodeAppend(now+int64(i), Append{Topic: "c", Batches: []PartitionBatch{{Partition: 0, Batch: keyedBatch(t, ms+int64(i), fmt.Sprint("k", i%3), v)}}}))
	}
	cmds = append(cmds, mustJSON(t, CmdTrim, now, Trim{Topic: "c", TopicIndex: 1, Partition: 0, Below: 2}))

	// The leader's view: prepare on a scratch FSM to learn the checksum.
	scratch, _ := testFSM(t, t.TempDir())
	scratch.ApplyBatch(entries(cmds...))
	p, _ := scratch.Partition("c", 0)
	if n := len(p.Log().Segments()); n != 10 {
		t.Fatalf("%d segments after the alter and the trim, want 10 (one per batch)", n)
	}
	below := p.Log().Segments()[len(p.Log().Segments())-1].BaseOffset
	cc, err := p.Log().PrepareCompaction(log.CompactOptions{Below: below, TombstoneHorizon: ms + 100, Codec: RecordCodec{}})
	if err != nil {
		t.Fatal(err)
	}
	cmd := Compact{Topic: "c", TopicIndex: 1, Partition: 0, Below: below, Horizon: ms + 100, Checksum: cc.Checksum(),
		Sources: sourcesOf(p.Log().Segments(), below)}
	cc.Discard()
	cmds = append(cmds, mustJSON(t, CmdCompact, now, cmd))

	want := []string{"8:k2=v8", "9:k0=v9", "10:k1=v10", "11:k2=v11"} // 11 is in the active segment
	var sums []string
	dirs := []string{t.TempDir(), t.TempDir()}
	for _, dir := range dirs {
		f, fatals := testFSM(t, dir)
		res := f.ApplyBatch(entries(cmds...))
		if len(*fatals) > 0 {
			t.Fatal(*fatals)
		}
		if r, ok := res[len(res)-1].(CompactResult); !ok || r.Skipped {
			t.Fatalf("compact result %#v", res[len(res)-1])
		}
		if tr, ok := res[len(res)-2].(TrimResult); !ok || tr.Segments != 2 {
			t.Fatalf("trim result %#v", res[len(res)-2])
		}
		if got := liveKV(t, f, "c"); !slices.Equal(got, want) {
			t.Fatalf("records %v, want %v", got, want)
		}
		run, ok := f.LastCleanerRun("c", 1, 0)
		if !ok || run.Action != "compact" || run.RecordsRemoved != 6 || run.BytesDeleted <= 0 {
			t.Fatalf("last run %+v", run)
		}
		f.Close()
		sums = append(sums, treeDigest(t, filepath.Join(dir, "topics"), ".log"))
	}
	if sums[0] != sums[1] {
		t.Fatalf("replicas differ:\n%s\n%s", sums[0], sums[1])
	}
	// A restart replays every entry: appends are skipped by applied index,
	// the trim deletes nothing more, the compaction finds its sources
	// changed and is skipped. Same bytes.
	f, fatals := testFSM(t, dirs[0])
	res := f.ApplyBatch(entries(cmds...))
	if len(*fatals) > 0 {
		t.Fatal(*fatals)
	}
	if r, ok := res[len(res)-1].(CompactResult); !ok || !r.Skipped {
		t.Fatalf("replayed compact %#v, want skipped", res[len(res)-1])
	}
	if got := liveKV(t, f, "c"); !slices.Equal(got, want) {
		t.Fatalf("after replay %v, want %v", got, want)
	}
	f.Close()
	if got := treeDigest(t, filepath.Join(dirs[0], "topics"), ".log"); got != sums[0] {
		t.Fatalf("restart changed the bytes:\n%s\n%s", got, sums[0])
	}
}

// TestCompactDivergenceStops: a checksum that differs from the local
// output stops the node and changes nothing.
func TestCompactDivergenceStops(t *testing.T) {
	ms := int64(1_700_000_000_000)
	now := ms * int64(time.Millisecond)
	cmds := [][]byte{mustJSON(t, CmdCreateTopic, now, CreateTopic{Name: "c", Partitions: 1, Config: map[string]string{ConfigCleanupPolicy: "compact", ConfigSegmentBytes: "100"}})}
	for i := range 4 {
		cmds = append(cmds, encodeAppend(now, Append{Topic: "c", Batches: []PartitionBatch{{Partition: 0, Batch: keyedBatch(t, ms, "k", fmt.Sprint(i))}}}))
	}
	f, fatals := testFSM(t, t.TempDir())
	f.ApplyBatch(entries(cmds...))
	p, _ := f.Partition("c", 0)
	before := liveKV(t, f, "c")
	res := f.apply(Entry{Index: uint64(len(cmds) + 1), Command: true,
		Data: mustJSON(t, CmdCompact, now, Compact{Topic: "c", TopicIndex: 1, Partition: 0, Below: 3, Checksum: 1, Sources: sourcesOf(p.Log().Segments(), 3)})})
	if err, _ := res.(error); !errors.Is(err, backend.ErrStopped) || len(*fatals) != 1 || !errors.Is((*fatals)[0], backend.ErrDiverged) {
		t.Fatalf("result %v, fatals %v", res, *fatals)
	}
	if got := liveKV(t, f, "c"); !slices.Equal(got, before) {
		t.Fatalf("records changed: %v -> %v", before, got)
	}
}
