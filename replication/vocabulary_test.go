package replication

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/log"
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
