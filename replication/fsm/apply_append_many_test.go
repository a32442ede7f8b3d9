package fsm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/logd-dev/logd/backend"
)

// appendManyScript is a topic created, then one append-many entry of
// appends to both partitions, keyed and not, with one append refused by
// its partition and one by an idempotency key an earlier append of the
// same entry took; then a plain append after it.
func appendManyScript(t *testing.T, now int64) (script []Entry, lastP0 []byte) {
	create := mustJSON(t, CmdCreateTopic, now, CreateTopic{Name: "m", Partitions: 2, Config: map[string]string{ConfigIdempotencyWindowMs: "3600000"}})
	lastP0 = mustBatch(t, "p0-c")
	many := EncodeAppendMany(now+1, [][]byte{
		encodeAppend(now+1, Append{Topic: "m", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, "p0-a", "p0-b")}}}),
		encodeAppend(now+1, Append{Topic: "m", Batches: []PartitionBatch{keyed(1, mustBatch(t, "p1-a"), "k1")}}),
		encodeAppend(now+1, Append{Topic: "m", Batches: []PartitionBatch{{Partition: 5, Batch: mustBatch(t, "nowhere")}}}),
		encodeAppend(now+1, Append{Topic: "m", Batches: []PartitionBatch{keyed(0, mustBatch(t, "p0-dup"), "k1")}}),
		encodeAppend(now+2, Append{Topic: "m", Batches: []PartitionBatch{{Partition: 1, Batch: mustBatch(t, "p1-b")}, {Partition: 0, Batch: lastP0}}}),
	})
	after := encodeAppend(now+3, Append{Topic: "m", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, "p0-d")}}})
	return entries(create, many, after), lastP0
}

// TestAppendManyOwnResults: each append of a coalesced entry gets its own
// result, in order, as if each were its own entry; a refusal leaves the
// others written.
func TestAppendManyOwnResults(t *testing.T) {
	now := int64(1_700_000_000_000_000_000)
	script, _ := appendManyScript(t, now)
	f, fatals := testFSM(t, t.TempDir())
	res := f.ApplyBatch(script)
	got, err := AppendManyResults(res[1], 5)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"[0]", "[0]", backend.ErrUnknownPartition.Error(), backend.ErrDedupRace.Error(), "[1 2]"}
	for i, r := range got {
		switch r := r.(type) {
		case AppendResult:
			if fmt.Sprint(r.BaseOffsets) != want[i] {
				t.Errorf("append %d: offsets %v, want %s", i, r.BaseOffsets, want[i])
			}
		case error:
			if w := []error{nil, nil, backend.ErrUnknownPartition, backend.ErrDedupRace, nil}[i]; w == nil || !errors.Is(r, w) {
				t.Errorf("append %d: %v, want %s", i, r, want[i])
			}
		default:
			t.Errorf("append %d: result %T", i, r)
		}
	}
	if r, ok := res[2].(AppendResult); !ok || fmt.Sprint(r.BaseOffsets) != "[3]" {
		t.Errorf("the append after: %v", res[2])
	}
	if got := readAll(t, f, "m", 0); fmt.Sprint(got) != "[p0-a p0-b p0-c p0-d]" {
		t.Errorf("partition 0 = %v", got)
	}
	if got := readAll(t, f, "m", 1); fmt.Sprint(got) != "[p1-a p1-b]" {
		t.Errorf("partition 1 = %v", got)
	}
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}
}

// TestAppendManyReplayAfterTornTail: a coalesced entry writes two batches
// to partition 0 at one Raft index; a crash that leaves only the first on
// disk (the second cut off as a torn tail) must have the replay write the
// second, once, and a whole replay write nothing twice.
func TestAppendManyReplayAfterTornTail(t *testing.T) {
	now := int64(1_700_000_000_000_000_000)
	script, lastP0 := appendManyScript(t, now)
	dir := t.TempDir()
	f1, _ := testFSM(t, dir)
	f1.ApplyBatch(script[:2])
	if err := f1.Close(); err != nil {
		t.Fatal(err)
	}
	// Cut partition 0's second batch of the entry off its segment.
	segs, err := filepath.Glob(filepath.Join(dir, "topics", "m~1", "0", "*.log"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments of m-0: %v, %v", segs, err)
	}
	st, err := os.Stat(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(segs[0], st.Size()-int64(len(lastP0))); err != nil {
		t.Fatal(err)
	}
	for run := range 3 {
		f2, fatals := testFSM(t, dir)
		for i, e := range script {
			f2.apply(e)
			if run == 0 && i == 0 {
				// The topic's logs opened over the files: the cut batch is
				// gone.
				p, err := f2.Partition("m", 0)
				if err != nil || p.Log().EndOffset() != 2 {
					t.Fatalf("after the cut: partition 0: %v", err)
				}
			}
		}
		if len(*fatals) != 0 {
			t.Fatalf("replay %d: %v", run, *fatals)
		}
		if got := readAll(t, f2, "m", 0); fmt.Sprint(got) != "[p0-a p0-b p0-c p0-d]" {
			t.Fatalf("replay %d: partition 0 = %v", run, got)
		}
		if got := readAll(t, f2, "m", 1); fmt.Sprint(got) != "[p1-a p1-b]" {
			t.Fatalf("replay %d: partition 1 = %v", run, got)
		}
		if err := f2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAppendManyMalformed: an append-many entry that is not one stops the
// state machine at decode, on every replica alike.
func TestAppendManyMalformed(t *testing.T) {
	now := int64(1_700_000_000_000_000_000)
	for name, inner := range map[string][][]byte{
		"empty":      nil,
		"not append": {mustJSON(t, CmdDeleteTopic, now, DeleteTopic{Name: "m"})},
		"sealed":     {Seal(encodeAppend(now, Append{Topic: "m", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, "x")}}}))},
		"short":      {{byte(CmdAppend), 1}},
	} {
		t.Run(name, func(t *testing.T) {
			f, fatals := testFSM(t, t.TempDir())
			f.ApplyBatch(entries(createCmd(t, "m", 1, now), EncodeAppendMany(now, inner)))
			if len(*fatals) != 1 || !errors.Is((*fatals)[0], backend.ErrBadCommand) {
				t.Fatalf("fatals %v, want one ErrBadCommand", *fatals)
			}
		})
	}
}
