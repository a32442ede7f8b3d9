package kafka

import (
	"testing"

	"github.com/logd-dev/logd/batch"
)

// TestServedRecords: a fetch counts the served records at or above its
// offset, not those of the first batch below it, which the client skips.
func TestServedRecords(t *testing.T) {
	build := func(base int64, n int) []byte {
		t.Helper()
		recs := make([]batch.Record, n)
		for i := range recs {
			recs[i] = batch.Record{Key: []byte("k"), Value: []byte("v")}
		}
		b, err := batch.Build(recs)
		if err != nil {
			t.Fatal(err)
		}
		batch.SetBaseOffset(b, base)
		return b
	}
	served := append(build(10, 5), build(15, 3)...) // offsets 10..17
	for _, tc := range []struct {
		name   string
		offset int64
		want   int
	}{
		{name: "from the first batch's base", offset: 10, want: 8},
		{name: "inside the first batch", offset: 13, want: 5},
		{name: "below the batches (a log start inside them)", offset: 0, want: 8},
		{name: "at the first batch's last record", offset: 14, want: 4},
	} {
		if got := servedRecords(served, tc.offset); got != tc.want {
			t.Errorf("%s: servedRecords at %d = %d; want %d", tc.name, tc.offset, got, tc.want)
		}
	}
	if got := servedRecords(served[:len(served)-1], 10); got != 5 {
		t.Errorf("a cut last batch: %d records; want the whole first batch's 5", got)
	}
}
