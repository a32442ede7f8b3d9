package replication

import (
	"errors"
	"testing"

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
