package replication

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/replication/fsm"
)

// TestRaftStatesAreRafts: the states package backend lists are the
// strings Status.State takes from raft.
func TestRaftStatesAreRafts(t *testing.T) {
	var want []string
	for _, s := range []raft.RaftState{raft.Follower, raft.Candidate, raft.Leader, raft.Shutdown} {
		want = append(want, s.String())
	}
	if got := backend.RaftStates(); !slices.Equal(got, want) {
		t.Errorf("backend.RaftStates() = %v, want %v", got, want)
	}
}

// TestFromStorage: a storage error reaches the front ends as the
// backend's value, its text and chain kept; other errors pass unchanged.
func TestFromStorage(t *testing.T) {
	oor := fmt.Errorf("read p0: %w", &log.OutOfRangeError{Offset: 9, Start: 2, End: 5})
	var be *backend.OutOfRangeError
	if err := fromStorage(oor); !errors.As(err, &be) || be.Start != 2 || be.End != 5 || be.Offset != 9 ||
		!errors.Is(err, backend.ErrOffsetOutOfRange) || !errors.Is(err, log.ErrOffsetOutOfRange) || err.Error() != oor.Error() {
		t.Errorf("out of range: %v (%+v)", err, be)
	}
	for _, tc := range []struct{ storage, want error }{
		{log.ErrCorrupt, backend.ErrCorrupt},
		{log.ErrClosed, backend.ErrLogClosed},
		{log.ErrBatchTooLarge, backend.ErrBatchTooLarge},
		{&log.InvalidBatchError{Reason: "x"}, backend.ErrInvalidBatch},
	} {
		if err := fromStorage(fmt.Errorf("ctx: %w", tc.storage)); !errors.Is(err, tc.want) {
			t.Errorf("%v: got %v, not %v", tc.storage, err, tc.want)
		}
	}
	other := errors.New("other")
	if fromStorage(other) != other || fromStorage(nil) != nil {
		t.Error("other errors changed")
	}
}

// TestRedriveSpecConversion: every field of a redrive spec survives the
// trip to the state machine's job definition and back, so a field added
// to one side and not converted fails here.
func TestRedriveSpecConversion(t *testing.T) {
	in := backend.RedriveSpec{DeadLetterTopic: "orders.dlq", Target: "orders", Reasons: []string{"rejected"}, Key: "k", HasKey: true,
		SinceMs: 1, UntilMs: 2, FromOffset: 3, ToOffset: 4, Rate: 5.5, MaxRedrives: 6, Records: []backend.RedriveRecord{{Partition: 1, Offset: 7}},
		Ends: []int64{8, 9}, Principal: "User:alice"}
	if v := reflect.ValueOf(in); slices.ContainsFunc(reflect.VisibleFields(v.Type()), func(f reflect.StructField) bool { return v.FieldByIndex(f.Index).IsZero() }) {
		t.Fatalf("the test spec leaves a field zero: %+v", in)
	}
	if out := redriveSpecOut(redriveSpecIn(in)); !reflect.DeepEqual(out, in) {
		t.Errorf("round trip:\n got %+v\nwant %+v", out, in)
	}
	job := fsm.RedriveJob{ID: "j", Spec: redriveSpecIn(in), State: backend.RedriveRunning, Error: "e",
		Progress: fsm.RedriveProgress{Scanned: 1, Redriven: 2, Duplicates: 3, Refused: 4, Skipped: 5, Bytes: 6}, CreatedNanos: 7, UpdatedNanos: 8}
	got := redriveJobOut(job)
	if v := reflect.ValueOf(got); slices.ContainsFunc(reflect.VisibleFields(v.Type()), func(f reflect.StructField) bool { return v.FieldByIndex(f.Index).IsZero() }) {
		t.Errorf("a job field did not come across: %+v", got)
	}
}
