package batch

import "testing"

// TestSpanFrom: the records at or above a reader's offset counted from
// headers, the cut after the batch that reaches max records, the offset
// after the last batch covered, and a cut batch at the end left out.
func TestSpanFrom(t *testing.T) {
	log := logOf(t, 5, 3, 4) // offsets 0-4, 5-7, 8-11
	_, n0, err := Decode(log)
	if err != nil {
		t.Fatal(err)
	}
	_, n1, err := Decode(log[n0:])
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		b      []byte
		offset int64
		max    int
		want   Span
	}{
		{name: "all from the first batch's base", b: log, offset: 0, want: Span{Len: len(log), Records: 12, Next: 12}},
		{name: "inside the first batch", b: log, offset: 3, want: Span{Len: len(log), Records: 9, Next: 12}},
		{name: "at the first batch's last record", b: log, offset: 4, want: Span{Len: len(log), Records: 8, Next: 12}},
		{name: "max reached inside the first batch", b: log, offset: 1, max: 2, want: Span{Len: n0, Records: 4, Next: 5}},
		{name: "max reached exactly at a batch's end", b: log, offset: 3, max: 5, want: Span{Len: n0 + n1, Records: 5, Next: 8}},
		{name: "max past a batch's end takes the next whole", b: log, offset: 3, max: 6, want: Span{Len: len(log), Records: 9, Next: 12}},
		{name: "max beyond everything", b: log, offset: 0, max: 100, want: Span{Len: len(log), Records: 12, Next: 12}},
		{name: "a cut last batch is left out", b: log[:len(log)-1], offset: 0, want: Span{Len: n0 + n1, Records: 8, Next: 8}},
		{name: "below the batches (a log start inside them)", b: log[n0:], offset: 0, want: Span{Len: len(log) - n0, Records: 7, Next: 12}},
		{name: "nothing", b: nil, offset: 7, want: Span{Next: 7}},
		{name: "the offset past the batches", b: log[:n0], offset: 9, want: Span{Len: n0, Records: 0, Next: 9}},
	} {
		if got := SpanFrom(tc.b, tc.offset, tc.max); got != tc.want {
			t.Errorf("%s: SpanFrom(%d, %d) = %+v; want %+v", tc.name, tc.offset, tc.max, got, tc.want)
		}
	}

	// A compacted batch: offsets 0 and 5-9 of 0-9 kept. From 5, six
	// records less five slots count 1, fewer than the 5 there are: a
	// lower bound, so a cut at max holds at least max records.
	full := logOf(t, 10)
	compacted, err := Filter(full, func(r *Record) bool { return r.Offset == 0 || r.Offset >= 5 })
	if err != nil {
		t.Fatal(err)
	}
	if got := SpanFrom(compacted, 5, 0); got.Records != 1 || got.Next != 10 {
		t.Errorf("compacted from 5: %+v; want 1 record counted, next 10", got)
	}
	recs, err := Records(compacted, 5, 0)
	if err != nil || len(recs) != 5 {
		t.Fatalf("compacted from 5 decodes %d records, %v", len(recs), err)
	}
}

// TestServeLeaderEpochs: every whole batch's leader epoch becomes -1 and
// its CRC still holds; a cut batch at the end is left alone.
func TestServeLeaderEpochs(t *testing.T) {
	log := logOf(t, 2, 3)
	for pos := 0; pos < len(log); {
		info, err := Peek(log[pos:])
		if err != nil {
			t.Fatal(err)
		}
		SetPartitionLeaderEpoch(log[pos:], 1234)
		pos += info.Length
	}
	ServeLeaderEpochs(log[:len(log)-1])
	batches, err := DecodeAll(log)
	if err != nil {
		t.Fatalf("served batches no longer decode: %v", err)
	}
	if got := batches[0].PartitionLeaderEpoch; got != UnknownLeaderEpoch {
		t.Errorf("first batch's epoch %d; want %d", got, UnknownLeaderEpoch)
	}
	if got := batches[1].PartitionLeaderEpoch; got != 1234 {
		t.Errorf("cut batch's epoch %d; want it untouched (1234)", got)
	}
	ServeLeaderEpochs(log)
	batches, err = DecodeAll(log)
	if err != nil || batches[1].PartitionLeaderEpoch != UnknownLeaderEpoch {
		t.Errorf("second batch after a whole serve: %+v, %v", batches[1].PartitionLeaderEpoch, err)
	}
}
