package fsm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/queue"
)

// groupFSM is testFSM for a state machine of data group g.
func groupFSM(t *testing.T, dir string, g uint64) (*FSM, *[]error) {
	t.Helper()
	var fatals []error
	f := New(Config{Dir: filepath.Join(dir, "topics"), Log: log.Options{Sync: log.SyncNone}, Logger: testLogger(), Group: g,
		Fatal: func(err error) { fatals = append(fatals, err) }})
	t.Cleanup(func() { f.Close() })
	return f, &fatals
}

// hostedOf lists which partitions of a topic the state machine hosts.
func hostedOf(t *testing.T, f *FSM, name string) string {
	t.Helper()
	tp, err := f.Topic(name)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i, p := range tp.Partitions {
		if p != nil {
			fmt.Fprintf(&b, "%d", i)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}

// partitionDirs lists the partition directories of a topic directory.
func partitionDirs(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func wantElsewhere(t *testing.T, what string, res any, p int32, g uint64) {
	t.Helper()
	err, _ := res.(error)
	var pe *PartitionElsewhereError
	if !errors.Is(err, backend.ErrPartitionElsewhere) || !errors.As(err, &pe) || pe.Partition != p || pe.Group != g {
		t.Fatalf("%s: %v, want partition %d elsewhere, in group %d", what, res, p, g)
	}
}

// stateDigest is the state machine's replicated state as its snapshot
// says (without the index and time, which every applied entry moves) plus
// the partition logs' bytes.
func stateDigest(t *testing.T, f *FSM, dir string) string {
	t.Helper()
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	buf := persist(t, s)
	line, rest, _ := bytes.Cut(buf.Bytes(), []byte("\n"))
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "index")
	delete(m, "now")
	j, _ := json.Marshal(m)
	logs := ""
	if _, err := os.Stat(filepath.Join(dir, "topics")); err == nil {
		logs = treeDigest(t, filepath.Join(dir, "topics"), ".log")
	}
	return fmt.Sprintf("%s\n%x\n%s", j, rest, logs)
}

// TestCreateTopicPlacement: a create-topic with a placement opens, in each
// group's state machine, only the partitions placed there (no directory
// for the others), and reading another group's partition answers which
// group holds it; the entry is at DataGroupLevel, and an entry of an
// older payload version that carried a placement stops the node.
func TestCreateTopicPlacement(t *testing.T) {
	c := CreateTopic{Name: "orders", Partitions: 4, Placement: []uint64{0, 1, 0, 2}, PlacementEpoch: 1}
	data := mustEncode(t)(EncodeCreateTopic(qnow, c))
	if level, _, err := EntryLevel(data); err != nil || level != DataGroupLevel {
		t.Fatalf("create-topic with a placement at level %d, %v", level, err)
	}
	for _, tc := range []struct {
		group  uint64
		hosted string
	}{{0, "0-2-"}, {1, "-1--"}, {2, "---3"}, {3, "----"}} {
		t.Run(fmt.Sprint("group ", tc.group), func(t *testing.T) {
			dir := t.TempDir()
			f, fatals := groupFSM(t, dir, tc.group)
			tp, ok := f.apply(Entry{Index: 1, Command: true, Data: data}).(*Topic)
			if !ok || len(*fatals) != 0 {
				t.Fatalf("create: %v %v", tp, *fatals)
			}
			if got := hostedOf(t, f, "orders"); got != tc.hosted {
				t.Fatalf("hosted %s, want %s", got, tc.hosted)
			}
			if tp.PlacementEpoch != 1 || !slices.Equal(tp.Placement, c.Placement) || f.AppliedLevel() != DataGroupLevel {
				t.Fatalf("topic %+v at level %d", tp, f.AppliedLevel())
			}
			var want []string
			for i, r := range tc.hosted {
				if r != '-' {
					want = append(want, fmt.Sprint(i))
				}
			}
			if tc.hosted == "----" {
				if _, err := os.Stat(filepath.Join(dir, "topics", "orders~1")); !os.IsNotExist(err) {
					t.Fatalf("a topic directory without partitions: %v", err)
				}
			} else if got := partitionDirs(t, filepath.Join(dir, "topics", "orders~1")); !slices.Equal(got, want) {
				t.Fatalf("partition dirs %v, want %v", got, want)
			}
			for i, r := range tc.hosted {
				_, err := f.Partition("orders", int32(i))
				if r == '-' {
					wantElsewhere(t, "read", err, int32(i), c.Placement[i])
				} else if err != nil {
					t.Fatal(err)
				}
			}
			if _, err := f.Partition("orders", 4); !errors.Is(err, backend.ErrUnknownPartition) {
				t.Fatalf("partition 4: %v", err)
			}
		})
	}
	t.Run("refused", func(t *testing.T) {
		f, _ := groupFSM(t, t.TempDir(), 0)
		for _, bad := range []CreateTopic{
			{Name: "a", Partitions: 2, Placement: []uint64{0}},
			{Name: "b", Partitions: 1, PlacementEpoch: 3},
		} {
			if err := ValidateCreateTopic(bad); !errors.Is(err, backend.ErrInvalidArgument) {
				t.Fatalf("%+v: %v", bad, err)
			}
			if _, ok := f.apply(Entry{Index: f.AppliedIndex() + 1, Command: true, Data: mustEncode(t)(EncodeCreateTopic(qnow, bad))}).(error); !ok {
				t.Fatalf("%+v applied", bad)
			}
		}
		if len(f.Topics()) != 0 {
			t.Fatal("a refused creation left a topic")
		}
	})
	t.Run("older version with a placement", func(t *testing.T) {
		f, fatals := groupFSM(t, t.TempDir(), 0)
		old := mustJSON(t, CmdCreateTopic, qnow, c) // payload version 1
		if _, ok := f.apply(Entry{Index: 1, Command: true, Data: old}).(error); !ok || len(*fatals) != 1 || !errors.Is((*fatals)[0], backend.ErrBadCommand) {
			t.Fatalf("fatals %v", *fatals)
		}
	})
}

// TestPartitionElsewhereRefusals: every command naming a partition
// another data group hosts is refused with *PartitionElsewhereError and
// changes nothing, neither the state nor a byte of the logs; queue claims
// deliver from the hosted partitions only.
func TestPartitionElsewhereRefusals(t *testing.T) {
	dir := t.TempDir()
	f, fatals := groupFSM(t, dir, 1)
	a := &applier{t: t, f: f}
	a.apply(mustEncode(t)(EncodeCreateTopic(qnow, CreateTopic{Name: "jobs", Partitions: 3, Placement: []uint64{1, 2, 1}, PlacementEpoch: 1})))
	if got := hostedOf(t, f, "jobs"); got != "0-2" {
		t.Fatalf("hosted %s", got)
	}
	if _, ok := a.apply(queueCmd(t, CmdQueueCreate, qnow, QueueCreate{Topic: "jobs", Group: "w", Secret: []byte("s")})).(error); ok {
		t.Fatal("queue create refused")
	}
	if got := hostedOf(t, f, "jobs.w.dlq"); got != "0-2" {
		t.Fatalf("dead-letter topic hosts %s: it follows its origin's placement", got)
	}
	a.apply(appendCmd(t, qnow, "jobs", 0, "a"))
	a.apply(appendCmd(t, qnow, "jobs", 2, "c"))
	claimed := a.claim(qnow+1, 10, time.Minute)
	if len(claimed.Records) != 2 || claimed.Records[0].Partition == 1 || claimed.Records[1].Partition == 1 {
		t.Fatalf("claim: %+v", claimed.Records)
	}
	info, err := f.DescribeQueueGroup("jobs", "w", qnow+1)
	if err != nil || len(info.Partitions) != 3 || info.Partitions[1].Ready != 0 || info.Partitions[1].End != 0 {
		t.Fatalf("describe: %+v %v", info, err)
	}
	tok := queue.Token{Partition: 1, Offset: 0, Delivery: 1}
	other := claimed.Records[0].Token
	tp := group.TopicPartition{Topic: "jobs", Partition: 1}
	refusals := []struct {
		name string
		cmd  []byte
	}{
		{"append", encodeAppend(qnow+2, Append{Topic: "jobs", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, "x")}, {Partition: 1, Batch: mustBatch(t, "y")}}})},
		{"trim", mustJSON(t, CmdTrim, qnow+2, Trim{Topic: "jobs", TopicIndex: 1, Partition: 1, Below: 1})},
		{"compact", mustJSON(t, CmdCompact, qnow+2, Compact{Topic: "jobs", TopicIndex: 1, Partition: 1, Below: 1})},
		{"queue ack", queueCmd(t, CmdQueueAck, qnow+2, QueueAck{Topic: "jobs", Group: "w", Tokens: []queue.Token{other, tok}})},
		{"queue nack", queueCmd(t, CmdQueueNack, qnow+2, QueueNack{Topic: "jobs", Group: "w", Nacks: []queue.Nack{{Token: other, Permanent: true}, {Token: tok}}})},
		{"queue extend", queueCmd(t, CmdQueueExtend, qnow+2, QueueExtend{Topic: "jobs", Group: "w", Lease: time.Hour, Tokens: []queue.Token{other, tok}})},
		{"group commit", mustJSON(t, CmdGroupCommit, qnow+2, GroupCommit{Group: "g", Member: "m", Generation: 1, Offsets: []group.OffsetCommit{{TopicPartition: tp, Offset: 0}}})},
		{"group reset offsets", mustJSON(t, CmdGroupResetOffsets, qnow+2, GroupResetOffsets{Group: "g", Offsets: []group.OffsetCommit{{TopicPartition: tp, Offset: 0}}})},
		{"group auto reset", mustJSON(t, CmdGroupAutoReset, qnow+2, GroupAutoReset{Group: "g", Member: "m", Generation: 1, Partition: tp, From: 0, To: 1})},
		{"group set offsets", EncodeGroupSetOffsets(qnow+2, GroupSetOffsets{Group: "g", Fence: group.NoFence, Offsets: []group.OffsetCommit{{TopicPartition: tp, Offset: 0}}})},
	}
	for _, r := range refusals {
		before := stateDigest(t, f, dir)
		wantElsewhere(t, r.name, a.apply(r.cmd), 1, 2)
		if after := stateDigest(t, f, dir); after != before {
			t.Errorf("%s changed the state:\n%s\n---\n%s", r.name, before, after)
		}
	}
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}
	// A growth keeps the placement of the partitions the topic has.
	grow := func(c CreatePartitions) any {
		return a.apply(mustEncode(t)(EncodeCreatePartitions(qnow+3, c)))
	}
	for _, bad := range []CreatePartitions{
		{Name: "jobs", Count: 4, Placement: []uint64{1, 1, 1, 2}, PlacementEpoch: 2}, // moves 1
		{Name: "jobs", Count: 4, Placement: []uint64{1, 2, 1}, PlacementEpoch: 2},    // too short
		{Name: "jobs", Count: 4}, // no placement for a placed topic
	} {
		before := stateDigest(t, f, dir)
		if err, ok := grow(bad).(error); !ok || !errors.Is(err, backend.ErrInvalidArgument) {
			t.Fatalf("%+v: %v", bad, err)
		}
		if stateDigest(t, f, dir) != before {
			t.Fatalf("refused growth %+v changed the state", bad)
		}
	}
	if _, ok := grow(CreatePartitions{Name: "jobs", Count: 5, Placement: []uint64{1, 2, 1, 2, 1}, PlacementEpoch: 2}).(*Topic); !ok {
		t.Fatal("growth refused")
	}
	if got := hostedOf(t, f, "jobs"); got != "0-2-4" {
		t.Fatalf("hosted after growth %s", got)
	}
	if res, ok := a.apply(appendCmd(t, qnow+4, "jobs", 4, "e")).(AppendResult); !ok || res.BaseOffsets[0] != 0 {
		t.Fatalf("append to a new hosted partition: %v", res)
	}
	// Deleting the topic sets its files aside like any topic's.
	if res := a.apply(mustJSON(t, CmdDeleteTopic, qnow+5, DeleteTopic{Name: "jobs"})); res != nil {
		t.Fatalf("delete: %v", res)
	}
	if _, err := os.Stat(filepath.Join(dir, "topics", "jobs~1")); !os.IsNotExist(err) {
		t.Fatalf("files of the deleted topic: %v", err)
	}
}

// adoptScript is a data group's log: partitions of one topic adopted,
// written, adopted further, and the refusals between.
func adoptScript(t *testing.T) ([][]byte, []string) {
	adopt := func(now int64, c PartitionAdopt) []byte { return mustJSON(t, CmdPartitionAdopt, now, c) }
	base := PartitionAdopt{Topic: "t", CreateIndex: 7, Partitions: 4, Placement: []uint64{1, 2, 1, 2}, Epoch: 1}
	more := base
	more.Partitions, more.Placement, more.Epoch = 5, []uint64{2, 2, 1, 2, 2}, 2
	away := more
	away.Placement, away.Epoch = []uint64{2, 1, 1, 2, 2}, 3
	older := more
	older.Epoch = 1
	sameEpochOther := base
	sameEpochOther.Placement = []uint64{1, 2, 2, 2}
	cmds := [][]byte{
		adopt(qnow, base),
		encodeAppend(qnow+1, Append{Topic: "t", Batches: []PartitionBatch{{Partition: 1, Batch: mustBatch(t, "a")}, {Partition: 3, Batch: mustBatch(t, "b")}}}),
		adopt(qnow+2, base), // again: nothing changes
		adopt(qnow+3, sameEpochOther),
		encodeAppend(qnow+4, Append{Topic: "t", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, "x")}}}),
		adopt(qnow+5, more),
		adopt(qnow+6, older),
		adopt(qnow+7, away),
		adopt(qnow+8, PartitionAdopt{Topic: "t", CreateIndex: 5, Partitions: 4, Placement: base.Placement, Epoch: 9}),
		adopt(qnow+9, PartitionAdopt{Topic: "t", CreateIndex: 9, Partitions: 4, Placement: base.Placement, Epoch: 9}),
		encodeAppend(qnow+10, Append{Topic: "t", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, "c")}, {Partition: 1, Batch: mustBatch(t, "d")}}}),
	}
	want := []string{
		"topic -1-3 epoch 1",
		"appended",
		"topic -1-3 epoch 1",
		"invalid argument",
		"elsewhere 0 in 1",
		"topic 01-34 epoch 2",
		"stale epoch",
		"invalid argument",
		"unknown topic",
		"topic exists",
		"appended",
	}
	return cmds, want
}

func adoptOutcome(res any) string {
	var pe *PartitionElsewhereError
	switch r := res.(type) {
	case *Topic:
		var b strings.Builder
		for i, p := range r.Partitions {
			if p != nil {
				fmt.Fprint(&b, i)
			} else {
				b.WriteByte('-')
			}
		}
		return fmt.Sprintf("topic %s epoch %d", b.String(), r.PlacementEpoch)
	case AppendResult:
		return "appended"
	case error:
		switch {
		case errors.As(r, &pe):
			return fmt.Sprintf("elsewhere %d in %d", pe.Partition, pe.Group)
		case errors.Is(r, ErrStalePlacement):
			return "stale epoch"
		case errors.Is(r, backend.ErrInvalidArgument):
			return "invalid argument"
		case errors.Is(r, backend.ErrUnknownTopic):
			return "unknown topic"
		case errors.Is(r, backend.ErrTopicExists):
			return "topic exists"
		}
		return r.Error()
	}
	return fmt.Sprintf("%T %v", res, res)
}

// TestPartitionAdopt: a data group's state machine adopts its partitions
// of a topic incarnation under the meta group's create index, extends
// them at a later epoch, and refuses an older epoch, a placement that
// moves a hosted partition away, other incarnations and writes to other
// groups' partitions, each refusal changing nothing; the whole log
// applied again after a restart (as Raft replays it) gives the same
// results and the same records, and so does a snapshot restored and the
// entries after it replayed twice.
func TestPartitionAdopt(t *testing.T) {
	dir := t.TempDir()
	cmds, want := adoptScript(t)
	if level, name, err := EntryLevel(cmds[0]); err != nil || level != DataGroupLevel || name != "partition-adopt" {
		t.Fatalf("partition-adopt: level %d, %q, %v", level, name, err)
	}
	script := entries(cmds...)
	run := func(f *FSM, es []Entry) []string {
		t.Helper()
		var got []string
		for _, e := range es {
			before := stateDigest(t, f, dir)
			res := f.apply(e)
			out := adoptOutcome(res)
			if _, refused := res.(error); refused && stateDigest(t, f, dir) != before {
				t.Errorf("entry %d (%s) changed the state", e.Index, out)
			}
			got = append(got, out)
		}
		return got
	}
	f, fatals := groupFSM(t, dir, 2)
	if got := run(f, script); !slices.Equal(got, want) {
		t.Fatalf("outcomes\n%q\nwant\n%q", got, want)
	}
	records := func(f *FSM) string {
		var parts []string
		for _, p := range []int32{0, 1, 3, 4} {
			parts = append(parts, fmt.Sprint(readAll(t, f, "t", p)))
		}
		return strings.Join(parts, " ")
	}
	const wantRecords = "[c] [a d] [b] []"
	if got := records(f); got != wantRecords {
		t.Fatalf("records %s", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "topics", "t~7", "2")); !os.IsNotExist(err) {
		t.Fatalf("partition 2 of group 1 has a directory here: %v", err)
	}
	const at = 6 // after the adopt at epoch 2
	f.Close()

	// Replay the whole log after a restart, twice.
	for i := 0; i < 2; i++ {
		g, gf := groupFSM(t, dir, 2)
		if got := run(g, script); !slices.Equal(got, want) {
			t.Fatalf("replay %d: outcomes\n%q\nwant\n%q", i, got, want)
		}
		if got := records(g); got != wantRecords || len(*gf) != 0 {
			t.Fatalf("replay %d: records %s, fatals %v", i, got, *gf)
		}
		g.Close()
	}

	// A snapshot taken mid-log, restored, and the rest replayed twice.
	h, hf := groupFSM(t, t.TempDir(), 2)
	h.ApplyBatch(script[:at])
	hsnap, err := h.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := persist(t, hsnap)
	hsnap.Release()
	hdir := filepath.Dir(h.root)
	h.Close()
	for i := 0; i < 2; i++ {
		r, rf := groupFSM(t, hdir, 2)
		if err := r.Restore(bytes.NewReader(sink.Bytes())); err != nil {
			t.Fatal(err)
		}
		if got := hostedOf(t, r, "t"); got != "01-34" {
			t.Fatalf("restored hosts %s", got)
		}
		tp, _ := r.Topic("t")
		if tp.PlacementEpoch != 2 || !slices.Equal(tp.Placement, []uint64{2, 2, 1, 2, 2}) || tp.CreateIndex != 7 {
			t.Fatalf("restored topic %+v", tp)
		}
		var got []string
		for _, e := range script[at:] {
			got = append(got, adoptOutcome(r.apply(e)))
		}
		if !slices.Equal(got, want[at:]) || len(*rf) != 0 {
			t.Fatalf("after restore %d: %q, fatals %v", i, got, *rf)
		}
		if got := records(r); got != wantRecords {
			t.Fatalf("after restore %d: records %s", i, got)
		}
		r.Close()
	}
	if len(*fatals) != 0 || len(*hf) != 0 {
		t.Fatal(*fatals, *hf)
	}
}

// TestSparseSnapshot: a snapshot of a sparse topic round-trips its
// placement, epoch and hosted partitions; it lists segments of the hosted
// partitions only (what a backup copies), a state machine of another
// data group refuses it, and a manifest whose placement and partitions
// disagree is refused.
func TestSparseSnapshot(t *testing.T) {
	dir := t.TempDir()
	f, _ := groupFSM(t, dir, 0)
	f.ApplyBatch(entries(
		mustEncode(t)(EncodeCreateTopic(qnow, CreateTopic{Name: "s", Partitions: 3, Placement: []uint64{0, 1, 0}, PlacementEpoch: 4})),
		createCmd(t, "dense", 1, qnow),
		encodeAppend(qnow, Append{Topic: "s", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, "a")}, {Partition: 2, Batch: mustBatch(t, "b")}}}),
	))
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := persist(t, snap)
	snap.Release()
	_, contents, err := ReadSnapshotManifest(bufio.NewReader(bytes.NewReader(sink.Bytes())))
	if err != nil {
		t.Fatal(err)
	}
	if contents.Group != 0 || len(contents.Segments) != 2 { // s-0 and s-2; dense is empty
		t.Fatalf("snapshot contents %+v", contents)
	}
	for _, s := range contents.Segments {
		if s.Topic == "s" && s.Partition == 1 {
			t.Fatalf("the snapshot lists a segment of another group's partition: %+v", s)
		}
	}
	// Its topics as a backup compares them: the hosted partitions only.
	if got := fmt.Sprintf("%+v", contents.Topics); !strings.Contains(got, "{Name:s CreateIndex:1 Partitions:3 Placement:[0 1 0] PlacementEpoch:4 Hosted:[0 2]}") ||
		!strings.Contains(got, "{Name:dense CreateIndex:2 Partitions:1 Placement:[] PlacementEpoch:0 Hosted:[0]}") {
		t.Fatalf("snapshot topics %s", got)
	}
	f.Close()

	other, _ := groupFSM(t, t.TempDir(), 1)
	if err := other.Restore(bytes.NewReader(sink.Bytes())); err == nil {
		t.Fatal("a state machine of group 1 restored group 0's snapshot")
	}

	r, fatals := groupFSM(t, dir, 0)
	if err := r.Restore(bytes.NewReader(sink.Bytes())); err != nil {
		t.Fatal(err)
	}
	tp, _ := r.Topic("s")
	if got := hostedOf(t, r, "s"); got != "0-2" || tp.PlacementEpoch != 4 || !slices.Equal(tp.Placement, []uint64{0, 1, 0}) {
		t.Fatalf("restored %s %+v", got, tp)
	}
	if d, _ := r.Topic("dense"); d.Placement != nil || d.Sparse() {
		t.Fatalf("dense topic restored with a placement %+v", d)
	}
	if got := fmt.Sprint(readAll(t, r, "s", 0), readAll(t, r, "s", 2)); got != "[a] [b]" {
		t.Fatalf("records %s", got)
	}
	_, err = r.Partition("s", 1)
	wantElsewhere(t, "restored read", err, 1, 1)
	// The state after the restore snapshots as before it.
	again, err := r.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if got := persist(t, again); !bytes.Equal(got.Bytes(), sink.Bytes()) {
		t.Fatalf("snapshot after restore differs:\n%s\n---\n%s", got, sink)
	}
	again.Release()
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}

	// A damaged manifest: placement says partition 1 is here, the
	// partitions say elsewhere.
	bad := bytes.Replace(sink.Bytes(), []byte(`"placement":[0,1,0]`), []byte(`"placement":[0,0,0]`), 1)
	if bytes.Equal(bad, sink.Bytes()) {
		t.Fatal("no placement in the manifest")
	}
	x, _ := groupFSM(t, t.TempDir(), 0)
	if err := x.Restore(bytes.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "disagree") {
		t.Fatalf("restore of a disagreeing manifest: %v", err)
	}
}

// TestPlacementPayloadVersions: a placement raises create-topic and
// create-partitions to their DataGroupLevel payload versions (also
// through EncodeJSON, which proposers use for create-partitions), and
// the versions before refuse a placement.
func TestPlacementPayloadVersions(t *testing.T) {
	grow := CreatePartitions{Name: "t", Count: 3, Placement: []uint64{0, 0, 1}, PlacementEpoch: 1}
	for _, tc := range []struct {
		name string
		data []byte
		want FeatureLevel
	}{
		{"create-topic without", mustEncode(t)(EncodeCreateTopic(1, CreateTopic{Name: "t", Partitions: 1})), BaseLevel},
		{"create-topic with", mustEncode(t)(EncodeCreateTopic(1, CreateTopic{Name: "t", Partitions: 1, Placement: []uint64{3}})), DataGroupLevel},
		{"create-partitions without", mustEncode(t)(EncodeJSON(CmdCreatePartitions, 1, CreatePartitions{Name: "t", Count: 3})), PartitionsLevel},
		{"create-partitions with", mustEncode(t)(EncodeJSON(CmdCreatePartitions, 1, grow)), DataGroupLevel},
		{"partition-adopt", mustEncode(t)(EncodeJSON(CmdPartitionAdopt, 1, PartitionAdopt{Topic: "t", CreateIndex: 1, Partitions: 1, Placement: []uint64{1}})), DataGroupLevel},
	} {
		level, _, err := EntryLevel(tc.data)
		if err != nil || level != tc.want {
			t.Errorf("%s: level %d, %v; want %d", tc.name, level, err, tc.want)
		}
		if _, err := decodeCommandWith(sealEntry(tc.data), &keyScratch{}); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	old := mustJSON(t, CmdCreatePartitions, 1, grow) // version 1 with a placement
	if _, err := decodeCommandWith(old, &keyScratch{}); !errors.Is(err, backend.ErrBadCommand) {
		t.Fatalf("create-partitions version 1 with a placement: %v", err)
	}
}

// TestDropAdoptedTopic: a data group drops the incarnation the meta group
// deleted (delete-topic naming it, at DataGroupLevel) and leaves another
// incarnation of the name alone, changing nothing.
func TestDropAdoptedTopic(t *testing.T) {
	dir := t.TempDir()
	f, fatals := groupFSM(t, dir, 1)
	a := &applier{t: t, f: f}
	a.apply(mustJSON(t, CmdPartitionAdopt, qnow, PartitionAdopt{Topic: "t", CreateIndex: 7, Partitions: 2, Placement: []uint64{1, 2}, Epoch: 1}))
	a.apply(appendCmd(t, qnow, "t", 0, "a"))
	drop := func(c DeleteTopic) []byte { return mustEncode(t)(EncodeJSON(CmdDeleteTopic, qnow, c)) }
	if level, _, err := EntryLevel(drop(DeleteTopic{Name: "t", TopicIndex: 7})); err != nil || level != DataGroupLevel {
		t.Fatalf("delete-topic naming an incarnation: level %d, %v", level, err)
	}
	if level, _, err := EntryLevel(drop(DeleteTopic{Name: "t"})); err != nil || level != BaseLevel {
		t.Fatalf("delete-topic: level %d, %v", level, err)
	}
	before := stateDigest(t, f, dir)
	if err, _ := a.apply(drop(DeleteTopic{Name: "t", TopicIndex: 5})).(error); !errors.Is(err, backend.ErrUnknownTopic) {
		t.Fatalf("drop of another incarnation: %v", err)
	}
	if stateDigest(t, f, dir) != before {
		t.Fatal("a refused drop changed the state")
	}
	if res := a.apply(drop(DeleteTopic{Name: "t", TopicIndex: 7})); res != nil {
		t.Fatalf("drop: %v", res)
	}
	if _, err := f.Topic("t"); !errors.Is(err, backend.ErrUnknownTopic) {
		t.Fatalf("topic after the drop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "topics", "t~7")); !os.IsNotExist(err) {
		t.Fatalf("files of the dropped topic: %v", err)
	}
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}
	old := mustJSON(t, CmdDeleteTopic, qnow, DeleteTopic{Name: "t", TopicIndex: 7}) // version 1
	if _, err := decodeCommandWith(old, &keyScratch{}); !errors.Is(err, backend.ErrBadCommand) {
		t.Fatalf("delete-topic version 1 naming an incarnation: %v", err)
	}
}

// TestSparseCatchUp: a follower of a data group that installs a snapshot
// into an empty directory fetches the segments of its group's partitions
// only, and creates nothing for the others.
func TestSparseCatchUp(t *testing.T) {
	src, _ := groupFSM(t, t.TempDir(), 2)
	src.ApplyBatch(entries(
		mustJSON(t, CmdPartitionAdopt, qnow, PartitionAdopt{Topic: "t", CreateIndex: 3, Partitions: 3, Placement: []uint64{2, 1, 2}, Epoch: 1}),
		encodeAppend(qnow, Append{Topic: "t", Batches: []PartitionBatch{{Partition: 0, Batch: mustBatch(t, "a")}, {Partition: 2, Batch: mustBatch(t, "b", "c")}}}),
	))
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := persist(t, snap)
	snap.Release()
	dir := t.TempDir()
	var fetched []int32
	dst := New(Config{Dir: filepath.Join(dir, "topics"), Log: log.Options{Sync: log.SyncNone}, Logger: testLogger(), Group: 2,
		Fetcher: fetchRecorder{dirFetcher{src: src}, &fetched}})
	t.Cleanup(func() { dst.Close() })
	if err := dst.Restore(sink); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fetched, []int32{0, 2}) {
		t.Fatalf("fetched partitions %v", fetched)
	}
	if got := fmt.Sprint(readAll(t, dst, "t", 0), readAll(t, dst, "t", 2)); got != "[a] [b c]" {
		t.Fatalf("records %s", got)
	}
	if got := partitionDirs(t, filepath.Join(dir, "topics", "t~3")); !slices.Equal(got, []string{"0", "2"}) {
		t.Fatalf("partition dirs %v", got)
	}
}

// fetchRecorder records which partitions a fetcher was asked for.
type fetchRecorder struct {
	f  SegmentFetcher
	ps *[]int32
}

func (r fetchRecorder) FetchSegments(req FetchRequest) error {
	*r.ps = append(*r.ps, req.Partition)
	return r.f.FetchSegments(req)
}

// TestGroupOffsetsWithEnds: the meta group holds consumer groups over a
// topic whose partitions data groups host. A command carrying a
// partition's end (read by the proposer from its group) is bounded by it
// like a hosted partition by its applied end; without one it is refused as
// before; ends at payload version 1 are malformed.
func TestGroupOffsetsWithEnds(t *testing.T) {
	dir := t.TempDir()
	f, fatals := groupFSM(t, dir, 0)
	a := &applier{t: t, f: f}
	a.apply(mustEncode(t)(EncodeCreateTopic(qnow, CreateTopic{Name: "orders", Partitions: 2, Placement: []uint64{1, 2}, PlacementEpoch: 1})))
	tp0 := group.TopicPartition{Topic: "orders", Partition: 0}
	tp1 := group.TopicPartition{Topic: "orders", Partition: 1}
	ends := []PartitionEnd{{Topic: "orders", Partition: 0, End: 10}, {Topic: "orders", Partition: 1, End: 3}}
	enc := func(ct CommandType, now int64, body any) []byte {
		t.Helper()
		d, err := EncodeJSON(ct, now, body)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	// Without ends: refused, as a partition hosted elsewhere.
	wantElsewhere(t, "set offsets without ends", a.apply(EncodeGroupSetOffsets(qnow+1, GroupSetOffsets{Group: "billing", Fence: group.NoFence, Offsets: []group.OffsetCommit{{TopicPartition: tp0, Offset: 4}}})), 0, 1)

	// With them: committed, and bounded by them.
	if res := a.apply(EncodeGroupSetOffsets(qnow+2, GroupSetOffsets{Group: "billing", Fence: group.NoFence, Offsets: []group.OffsetCommit{{TopicPartition: tp0, Offset: 10}, {TopicPartition: tp1, Offset: 2}}, Ends: ends})); res != nil {
		t.Fatalf("set offsets with ends: %v", res)
	}
	if res, _ := a.apply(EncodeGroupSetOffsets(qnow+3, GroupSetOffsets{Group: "billing", Fence: group.NoFence, Offsets: []group.OffsetCommit{{TopicPartition: tp1, Offset: 4}}, Ends: ends})).(error); !errors.Is(res, group.ErrOffsetAboveEnd) {
		t.Fatalf("an offset above the carried end: %v, want ErrOffsetAboveEnd", res)
	}
	// An end for one partition does not admit another.
	wantElsewhere(t, "an end for another partition", a.apply(EncodeGroupSetOffsets(qnow+3, GroupSetOffsets{Group: "billing", Fence: group.NoFence, Offsets: []group.OffsetCommit{{TopicPartition: tp1, Offset: 1}}, Ends: ends[:1]})), 1, 2)
	// An operator's reset clamps to the carried end.
	if res := a.apply(enc(CmdGroupResetOffsets, qnow+4, GroupResetOffsets{Group: "billing", Offsets: []group.OffsetCommit{{TopicPartition: tp0, Offset: 50}, {TopicPartition: tp1, Offset: 0}}, Ends: ends})); res != nil {
		t.Fatalf("reset with ends: %v", res)
	}
	g, err := f.ConsumerGroup("billing")
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Topics["orders"].Partitions[0].Committed; got != 10 {
		t.Errorf("orders-0 reset to 50 with an end of 10 committed %d, want 10", got)
	}
	if got := g.Topics["orders"].Partitions[1].Committed; got != 0 {
		t.Errorf("orders-1 committed %d, want 0", got)
	}

	// A member of logd's protocol commits with ends too.
	if _, ok := a.apply(mustJSON(t, CmdGroupJoin, qnow+5, GroupJoin{Group: "analytics", Member: "m1", Topics: []string{"orders"}, SessionTimeoutMs: 60000})).(group.Assignment); !ok {
		t.Fatal("join refused")
	}
	gen := func() int64 {
		g, err := f.ConsumerGroup("analytics")
		if err != nil {
			t.Fatal(err)
		}
		return g.Generation
	}()
	commit := GroupCommit{Group: "analytics", Member: "m1", Generation: gen, Offsets: []group.OffsetCommit{{TopicPartition: tp0, Offset: 7}}, Ends: ends}
	data := enc(CmdGroupCommit, qnow+6, commit)
	if lvl, _, err := EntryLevel(data); err != nil || lvl != PlacedGroupsLevel {
		t.Fatalf("a commit with ends needs level %d, want %d (%v)", lvl, PlacedGroupsLevel, err)
	}
	old := append([]byte{}, data...)
	old[1] = commandVersion
	if _, err := decodeCommandWith(sealEntry(old), &keyScratch{}); !errors.Is(err, backend.ErrBadCommand) {
		t.Fatalf("a commit with ends at version 1: %v, want ErrBadCommand", err)
	}
	if res := a.apply(data); res != nil {
		t.Fatalf("commit with ends: %v", res)
	}
	if g, _ := f.ConsumerGroup("analytics"); g.Topics["orders"].Partitions[0].Committed != 7 {
		t.Fatalf("analytics committed %+v", g.Topics["orders"])
	}
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}
}

// TestTopicArrived: a topic a data group adopts, and the state machine's
// close, wake TopicArrived's waiters (a long poll of a partition the
// replica has not adopted yet waits on it); an append does not.
func TestTopicArrived(t *testing.T) {
	cmds, _ := adoptScript(t)
	f, _ := groupFSM(t, t.TempDir(), 2)
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	before := f.TopicArrived()
	if closed(before) {
		t.Fatal("closed before any topic arrived")
	}
	es := entries(cmds...)
	if res := f.apply(es[0]); adoptOutcome(res) != "topic -1-3 epoch 1" {
		t.Fatalf("adopt: %s", adoptOutcome(res))
	}
	if !closed(before) {
		t.Fatal("the adopted topic did not wake the waiter")
	}
	after := f.TopicArrived()
	if closed(after) {
		t.Fatal("the next channel is closed already")
	}
	if res := f.apply(es[1]); adoptOutcome(res) != "appended" {
		t.Fatalf("append: %s", adoptOutcome(res))
	}
	if closed(after) {
		t.Fatal("an append woke the waiter")
	}
	f.Close()
	if !closed(after) {
		t.Fatal("closing the state machine did not wake the waiter")
	}
}
