package replication

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
)

// TestReadFloors: a floor only rises, per partition and incarnation of
// its topic; a new incarnation starts from 0; an answer's end is its
// result's or its out-of-range error's.
func TestReadFloors(t *testing.T) {
	var f readFloors
	if got := f.get("t", 0, 1); got != 0 {
		t.Fatalf("an unread partition's floor %d", got)
	}
	f.raise("t", 0, 1, 10)
	f.raise("t", 0, 1, 7)
	f.raise("t", 1, 1, 3)
	if got := f.get("t", 0, 1); got != 10 {
		t.Errorf("floor after 10 then 7: %d, want 10", got)
	}
	if got := f.get("t", 1, 1); got != 3 {
		t.Errorf("partition 1's floor %d, want 3", got)
	}
	if got := f.get("t", 0, 2); got != 0 {
		t.Errorf("a new incarnation's floor %d, want 0", got)
	}
	f.raise("t", 0, 2, 1)
	if got := f.get("t", 0, 2); got != 1 {
		t.Errorf("the new incarnation's floor %d, want 1", got)
	}
	if end, ok := answeredEnd(backend.ReadResult{EndOffset: 5}, nil); !ok || end != 5 {
		t.Errorf("a result's end: %d %v", end, ok)
	}
	if end, ok := answeredEnd(backend.ReadResult{}, &backend.OutOfRangeError{Offset: 9, End: 4}); !ok || end != 4 {
		t.Errorf("an out-of-range answer's end: %d %v", end, ok)
	}
	if _, ok := answeredEnd(backend.ReadResult{}, errors.New("x")); ok {
		t.Error("another error shows an end")
	}
}

// TestFirstRemoteReadAtTheLeader: a node that has no floor for a
// partition of a topic created before it started (it never read it since,
// as after a restart, when it cannot know what it answered before) reads
// it remotely from the group's leader only; once that answer set the
// floor, any replica at or above it may answer; a topic created after the
// start needs no leader.
func TestFirstRemoteReadAtTheLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, nodes, describe := dataGroupCluster(ctx, t, func(cfg *Config) { cfg.DataGroupsPerNode, cfg.ReplicationFactor = 1, 2 })
	waitGroupsOfTwo(ctx, t, nodes, describe)
	b := NewBackend(nodes[1])
	// As if this process had started with the meta group at index 100:
	// topics created at or below it may have been read by an earlier one.
	b.startIndex = 100
	var asked []bool
	remote := func(_ context.Context, floor int64, leader bool) (backend.ReadResult, error) {
		asked = append(asked, leader)
		return backend.ReadResult{EndOffset: 5}, nil
	}
	for range 2 {
		if r, err := b.readPlaced("t", 0, 1, 1, nil, remote); err != nil || r.EndOffset != 5 {
			t.Fatalf("read: %+v, %v", r, err)
		}
	}
	// A new incarnation of the topic has no floor either.
	if _, err := b.readPlaced("t", 0, 2, 1, nil, remote); err != nil {
		t.Fatal(err)
	}
	// A topic created after the start: no earlier process read it.
	if _, err := b.readPlaced("t", 0, 101, 1, nil, remote); err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, false, true, false}; !slices.Equal(asked, want) {
		t.Errorf("reads asked the leader only %v, want %v", asked, want)
	}
}
