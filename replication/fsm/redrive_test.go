package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
)

// TestRedriveApply: a job starts with an id from its index, advances
// (position and counters in one entry), stops, and an ended job stays as
// it is; each refusal is typed and changes nothing; a snapshot keeps the
// jobs and their positions; the oldest ended jobs are dropped past the
// bound.
func TestRedriveApply(t *testing.T) {
	dir := t.TempDir()
	f, fatals := testFSM(t, dir)
	a := &applier{t: t, f: f}
	a.apply(createCmd(t, "o", 1, qnow))
	a.apply(createCmd(t, "o-dlq", 2, qnow))
	a.apply(appendCmd(t, qnow, "o-dlq", 0, "a", "b", "c"))
	cmd := func(c Redrive) []byte { return mustJSON(t, CmdRedrive, qnow, c) }
	spec := RedriveSpec{DeadLetterTopic: "o-dlq", MaxRedrives: 3, Ends: []int64{3, 0}}

	for _, tc := range []struct {
		name string
		c    Redrive
		err  error
	}{
		{name: "no spec", c: Redrive{Op: RedriveStart}, err: backend.ErrInvalidArgument},
		{name: "unknown topic", c: Redrive{Op: RedriveStart, Spec: &RedriveSpec{DeadLetterTopic: "nope", MaxRedrives: 3}}, err: backend.ErrUnknownTopic},
		{name: "ends", c: Redrive{Op: RedriveStart, Spec: &RedriveSpec{DeadLetterTopic: "o-dlq", MaxRedrives: 3, Ends: []int64{3}}}, err: backend.ErrInvalidArgument},
		{name: "negative rate", c: Redrive{Op: RedriveStart, Spec: &RedriveSpec{DeadLetterTopic: "o-dlq", MaxRedrives: 3, Ends: []int64{3, 0}, Rate: -1}}, err: backend.ErrInvalidArgument},
		{name: "unknown op", c: Redrive{Op: "resume", ID: "rd1"}, err: backend.ErrInvalidArgument},
		{name: "unknown job", c: Redrive{Op: RedriveStop, ID: "rd1"}, err: backend.ErrUnknownRedrive},
	} {
		if err, _ := a.apply(cmd(tc.c)).(error); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
	if len(f.RedriveJobs()) != 0 {
		t.Fatalf("jobs after refusals: %+v", f.RedriveJobs())
	}
	res := a.apply(cmd(Redrive{Op: RedriveStart, Spec: &spec}))
	j, ok := res.(RedriveJob)
	if !ok || j.ID != redriveID(a.index) || j.State != RedriveRunning {
		t.Fatalf("start: %+v", res)
	}
	commit := func(p int32, off int64) []group.OffsetCommit {
		return []group.OffsetCommit{{TopicPartition: group.TopicPartition{Topic: "o-dlq", Partition: p}, Offset: off}}
	}
	for _, tc := range []struct {
		name string
		c    Redrive
		err  error
	}{
		{name: "other topic", c: Redrive{Op: RedriveAdvance, ID: j.ID, Offsets: []group.OffsetCommit{{TopicPartition: group.TopicPartition{Topic: "o"}, Offset: 1}}}, err: backend.ErrInvalidArgument},
		{name: "counters", c: Redrive{Op: RedriveAdvance, ID: j.ID, Delta: RedriveProgress{Scanned: 1, Redriven: 2}}, err: backend.ErrInvalidArgument},
		{name: "beyond the end", c: Redrive{Op: RedriveAdvance, ID: j.ID, Offsets: commit(0, 9)}, err: group.ErrOffsetAboveEnd},
	} {
		if err, _ := a.apply(cmd(tc.c)).(error); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
	a.apply(cmd(Redrive{Op: RedriveAdvance, ID: j.ID, Offsets: commit(0, 2), Delta: RedriveProgress{Scanned: 2, Redriven: 1, Skipped: 1, Bytes: 5}}))
	g, err := f.ConsumerGroup(RedriveGroup(j.ID))
	if err != nil || g.Topics["o-dlq"].Partitions[0].Committed != 2 || g.Generation != 0 {
		t.Fatalf("position group: %+v, %v", g, err)
	}
	if !group.Internal(g.Name) {
		t.Fatalf("%s is not internal", g.Name)
	}
	if got, _ := f.RedriveJob(j.ID); got.Progress != (RedriveProgress{Scanned: 2, Redriven: 1, Skipped: 1, Bytes: 5}) {
		t.Fatalf("progress %+v", got.Progress)
	}
	a.apply(cmd(Redrive{Op: RedriveStop, ID: j.ID}))
	// A batch in hand at the stop still commits; finishing a stopped job
	// changes nothing.
	a.apply(cmd(Redrive{Op: RedriveAdvance, ID: j.ID, Offsets: commit(0, 3), Delta: RedriveProgress{Scanned: 1, Redriven: 1, Bytes: 2}}))
	a.apply(cmd(Redrive{Op: RedriveFinish, ID: j.ID, Error: "late"}))
	got, _ := f.RedriveJob(j.ID)
	if got.State != RedriveStopped || got.Error != "" || got.Progress.Redriven != 2 {
		t.Fatalf("after stop: %+v", got)
	}

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := persist(t, snap)
	f.Close()
	f2, _ := testFSM(t, dir)
	if err := f2.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if r, _ := f2.RedriveJob(j.ID); r.State != got.State || r.Progress != got.Progress || len(r.Spec.Ends) != 2 {
		t.Fatalf("restored %+v, want %+v", r, got)
	}
	if g, err := f2.ConsumerGroup(RedriveGroup(j.ID)); err != nil || g.Topics["o-dlq"].Partitions[0].Committed != 3 {
		t.Fatalf("restored position: %+v, %v", g, err)
	}

	// Past maxEndedRedrives ended jobs, the oldest go; running ones stay.
	b := &applier{t: t, f: f2, index: a.index}
	running := b.apply(cmd(Redrive{Op: RedriveStart, Spec: &spec})).(RedriveJob)
	for range maxEndedRedrives + 1 {
		s := b.apply(cmd(Redrive{Op: RedriveStart, Spec: &spec})).(RedriveJob)
		b.apply(cmd(Redrive{Op: RedriveFinish, ID: s.ID}))
	}
	b.apply(cmd(Redrive{Op: RedriveStart, Spec: &spec}))
	if _, err := f2.RedriveJob(j.ID); !errors.Is(err, backend.ErrUnknownRedrive) {
		t.Fatalf("oldest ended job kept: %v", err)
	}
	if _, err := f2.RedriveJob(running.ID); err != nil {
		t.Fatalf("running job dropped: %v", err)
	}
	if n := len(f2.RedriveJobs()); n != maxEndedRedrives+2 {
		t.Fatalf("%d jobs kept, want %d", n, maxEndedRedrives+2)
	}
	if len(*fatals) != 0 {
		t.Fatal(*fatals)
	}
}

// TestRedriveRecordsLevel: a start naming its records is payload version
// redriveRecordsVersion at RedriveSelectLevel, so a cluster below it
// refuses to propose it (EntryLevel); a version-1 payload naming records
// does not decode; records out of order, repeated, in no partition or at
// or past the end are refused and change nothing; a job keeps its records.
func TestRedriveRecordsLevel(t *testing.T) {
	spec := RedriveSpec{DeadLetterTopic: "o-dlq", MaxRedrives: 3, Ends: []int64{3, 2}}
	plain, err := EncodeRedrive(qnow, Redrive{Op: RedriveStart, Spec: &spec})
	if err != nil {
		t.Fatal(err)
	}
	named := spec
	named.Records = []RedriveRecord{{Partition: 0, Offset: 1}, {Partition: 1, Offset: 0}}
	selected, err := EncodeRedrive(qnow, Redrive{Op: RedriveStart, Spec: &named})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want FeatureLevel
	}{
		{name: "filter only", data: plain, want: RedriveLevel},
		{name: "named records", data: selected, want: RedriveSelectLevel},
	} {
		if got, _, err := EntryLevel(tc.data); err != nil || got != tc.want {
			t.Errorf("%s: level %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
	if RedriveSelectLevel > Level {
		t.Fatalf("this build's level %d is below RedriveSelectLevel", Level)
	}
	if _, err := decodeRedrive(selected[cmdHeaderSize:], commandVersion, nil); !errors.Is(err, backend.ErrBadCommand) {
		t.Errorf("version 1 naming records: %v, want backend.ErrBadCommand", err)
	}

	f, _ := testFSM(t, t.TempDir())
	a := &applier{t: t, f: f}
	a.apply(createCmd(t, "o-dlq", 2, qnow))
	a.apply(appendCmd(t, qnow, "o-dlq", 0, "a", "b", "c"))
	a.apply(appendCmd(t, qnow, "o-dlq", 1, "d", "e"))
	start := func(records ...RedriveRecord) any {
		s := spec
		s.Records = records
		data, err := EncodeRedrive(qnow, Redrive{Op: RedriveStart, Spec: &s})
		if err != nil {
			t.Fatal(err)
		}
		return a.apply(data)
	}
	for _, tc := range []struct {
		name    string
		records []RedriveRecord
	}{
		{name: "out of order", records: []RedriveRecord{{Partition: 1, Offset: 0}, {Partition: 0, Offset: 1}}},
		{name: "repeated", records: []RedriveRecord{{Partition: 0, Offset: 1}, {Partition: 0, Offset: 1}}},
		{name: "no such partition", records: []RedriveRecord{{Partition: 2, Offset: 0}}},
		{name: "at the end", records: []RedriveRecord{{Partition: 1, Offset: 2}}},
		{name: "negative offset", records: []RedriveRecord{{Partition: 0, Offset: -1}}},
	} {
		if err, _ := start(tc.records...).(error); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("%s: %v, want backend.ErrInvalidArgument", tc.name, err)
		}
	}
	if len(f.RedriveJobs()) != 0 {
		t.Fatalf("jobs after refusals: %+v", f.RedriveJobs())
	}
	j, ok := start(named.Records...).(RedriveJob)
	if !ok || len(j.Spec.Records) != 2 || !j.Spec.Selects(0, 1) || j.Spec.Selects(0, 0) || !j.Spec.Selects(1, 0) {
		t.Fatalf("start naming records: %+v", j)
	}
	if next, ok := j.Spec.NextRecord(0, 2); ok {
		t.Errorf("next named record of partition 0 after offset 1: %d", next)
	}
	if next, ok := j.Spec.NextRecord(1, 0); !ok || next != 0 {
		t.Errorf("next named record of partition 1: %d, %v", next, ok)
	}
}
