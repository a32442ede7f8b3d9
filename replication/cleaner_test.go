package replication

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/log"
)

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
func liveKV(t *testing.T, f *FSM, topic string) []string {
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
	cc, err := p.Log().PrepareCompaction(log.CompactOptions{Below: below, TombstoneHorizon: ms + 100, Codec: recordCodec{}})
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
	res := f.Apply(&raft.Log{Index: uint64(len(cmds) + 1), Term: 1, Type: raft.LogCommand,
		Data: mustJSON(t, CmdCompact, now, Compact{Topic: "c", TopicIndex: 1, Partition: 0, Below: 3, Checksum: 1, Sources: sourcesOf(p.Log().Segments(), 3)})})
	if err, _ := res.(error); !errors.Is(err, ErrStopped) || len(*fatals) != 1 || !errors.Is((*fatals)[0], ErrDiverged) {
		t.Fatalf("result %v, fatals %v", res, *fatals)
	}
	if got := liveKV(t, f, "c"); !slices.Equal(got, before) {
		t.Fatalf("records changed: %v -> %v", before, got)
	}
}

// TestCleanerNode runs the leader's cleaner with an injected clock: time
// retention at its exact boundary, then compaction, with fetches below the
// new log start out of range.
func TestCleanerNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	clock := time.UnixMilli(1_700_000_000_000)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	dir := t.TempDir()
	n, err := Open(Config{NodeID: "n1", DataDir: dir, RaftBind: "127.0.0.1:0", Bootstrap: true, Logger: testLogger(),
		RaftLogLevel: "error", Fatal: func(err error) { t.Errorf("fatal: %v", err) }, Now: now, CleanerInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for !n.IsLeader() {
		select {
		case <-ctx.Done():
			t.Fatal("no leader")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if _, err := n.CreateTopic(ctx, CreateTopic{Name: "r", Partitions: 1, Config: map[string]string{
		ConfigRetentionMs: "1000", ConfigSegmentBytes: "100", ConfigCleanupPolicy: "compact,delete", ConfigDeleteRetentionMs: "0"}}); err != nil {
		t.Fatal(err)
	}
	base := now().UnixMilli()
	for i := range 6 {
		// Records 0-2 at base, 3-5 at base+500.
		ts := base + int64(i/3)*500
		if _, err := n.Append(ctx, Append{Topic: "r", Batches: []PartitionBatch{{Partition: 0, Batch: keyedBatch(t, ts, fmt.Sprint("k", i%2), fmt.Sprint("v", i))}}}); err != nil {
			t.Fatal(err)
		}
	}
	p, _ := n.FSM().Partition("r", 0)
	// Exactly retention.ms after the first three: nothing expires yet.
	// Compaction runs (compact,delete) but offsets stay.
	advance(1000 * time.Millisecond)
	if err := n.Clean(ctx); err != nil {
		t.Fatal(err)
	}
	if s := p.Log().StartOffset(); s != 0 {
		t.Fatalf("log start %d after exactly retention.ms, want 0", s)
	}
	// Offset 5 is in the active segment, so 3 (k1) is still the newest
	// k1 below the cleaning point.
	if got, want := liveKV(t, n.FSM(), "r"), []string{"3:k1=v3", "4:k0=v4", "5:k1=v5"}; !slices.Equal(got, want) {
		t.Fatalf("after compaction %v, want %v", got, want)
	}
	// One ms later the first three segments expire.
	advance(time.Millisecond)
	if err := n.Clean(ctx); err != nil {
		t.Fatal(err)
	}
	if s := p.Log().StartOffset(); s != 3 {
		t.Fatalf("log start %d, want 3", s)
	}
	var oor *log.OutOfRangeError
	if _, err := p.Log().Read(2, 100); !errors.As(err, &oor) || oor.Start != 3 || oor.End != 6 {
		t.Fatalf("read below the log start: %v", err)
	}
	c := n.FSM().CleanerCounters()
	if c.Trims != 1 || c.Compactions < 1 || c.BytesDeleted <= 0 || c.RecordsCompacted != 3 {
		t.Fatalf("counters %+v", c)
	}
	if st := n.CleanerStats(); st.Prepared < 1 || st.Runs != 2 {
		t.Fatalf("stats %+v", st)
	}
	// The cleaner goroutine closes the files the trim and the compactions
	// unlinked, off the apply path.
	for tick := time.NewTicker(5 * time.Millisecond); openUnlinked(t, dir) > 0; {
		select {
		case <-ctx.Done():
			t.Fatalf("%d unlinked segment files still open", openUnlinked(t, dir))
		case <-tick.C:
		}
	}
	// Alter through the node.
	if _, err := n.AlterTopic(ctx, AlterTopic{Name: "r", Config: map[string]string{ConfigRetentionMs: "-1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.AlterTopic(ctx, AlterTopic{Name: "r", Config: map[string]string{"bogus": "1"}}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad alter: %v", err)
	}
	tp, _ := n.FSM().Topic("r")
	if tp.Config[ConfigRetentionMs] != "-1" {
		t.Fatalf("config %v", tp.Config)
	}
}

// openUnlinked counts this process's open files under dir that were
// unlinked (Linux; 0 elsewhere).
func openUnlinked(t *testing.T, dir string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	n := 0
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir) && strings.HasSuffix(target, " (deleted)") {
			n++
		}
	}
	return n
}
