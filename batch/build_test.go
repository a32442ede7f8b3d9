package batch

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestBuildDecodeRoundTrip(t *testing.T) {
	many := make([]Record, 1000)
	for i := range many {
		many[i] = Record{Timestamp: 1_700_000_000_000 + int64(i), Key: []byte{byte(i), byte(i >> 8)}, Value: bytes.Repeat([]byte{'v'}, i%37)}
	}
	tests := []struct {
		name    string
		records []Record
	}{
		{name: "one record", records: []Record{{Timestamp: 1, Key: []byte("k"), Value: []byte("v")}}},
		{name: "null key and value", records: []Record{{Timestamp: 5}}},
		{name: "empty key and value", records: []Record{{Key: []byte{}, Value: []byte{}}}},
		{name: "null key empty value", records: []Record{{Value: []byte{}}}},
		{name: "empty key null value", records: []Record{{Key: []byte{}}}},
		{name: "headers", records: []Record{{
			Key: []byte("k"), Value: []byte("v"),
			Headers: []Header{{Key: "a", Value: []byte("1")}, {Key: "", Value: []byte{}}, {Key: "null", Value: nil}, {Key: "a", Value: []byte("dup")}},
		}}},
		{name: "headers on some records", records: []Record{
			{Value: []byte("a"), Headers: []Header{{Key: "x", Value: []byte("1")}}},
			{Value: []byte("b")},
			{Value: []byte("c"), Headers: []Header{{Key: "y", Value: nil}, {Key: "z", Value: []byte("3")}}},
		}},
		{name: "timestamps out of order", records: []Record{{Timestamp: 100}, {Timestamp: 50}, {Timestamp: 200}, {Timestamp: 0}}},
		{name: "negative timestamps", records: []Record{{Timestamp: -1}, {Timestamp: -1_000_000}}},
		{name: "extreme timestamps", records: []Record{{Timestamp: math.MinInt64}, {Timestamp: math.MaxInt64}, {Timestamp: 0}}},
		{name: "large value", records: []Record{{Key: []byte("big"), Value: bytes.Repeat([]byte("0123456789abcdef"), 1<<16)}}},
		{name: "large header", records: []Record{{Headers: []Header{{Key: strings.Repeat("k", 300), Value: bytes.Repeat([]byte{1}, 70000)}}}}},
		{name: "many records", records: many},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustBuild(t, tt.records)
			got, n, err := Decode(b)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if n != len(b) {
				t.Errorf("consumed %d bytes, want %d", n, len(b))
			}
			want := make([]Record, len(tt.records))
			copy(want, tt.records)
			maxTS := tt.records[0].Timestamp
			for i := range want {
				want[i].Offset = int64(i)
				maxTS = max(maxTS, want[i].Timestamp)
			}
			equalRecords(t, got.Records, want, true)
			if got.BaseOffset != 0 || got.LastOffsetDelta != int32(len(want)-1) {
				t.Errorf("base offset %d, last offset delta %d", got.BaseOffset, got.LastOffsetDelta)
			}
			if got.BaseTimestamp != tt.records[0].Timestamp || got.MaxTimestamp != maxTS {
				t.Errorf("timestamps base %d max %d, want %d %d", got.BaseTimestamp, got.MaxTimestamp, tt.records[0].Timestamp, maxTS)
			}
			if got.ProducerID != -1 || got.ProducerEpoch != -1 || got.BaseSequence != -1 {
				t.Errorf("producer state %d/%d/%d, want -1/-1/-1", got.ProducerID, got.ProducerEpoch, got.BaseSequence)
			}
			if got.Attributes != 0 || got.IsControl() || got.IsTransactional() || got.LogAppendTime() {
				t.Errorf("attributes %#x, want 0", got.Attributes)
			}

			// The same content decodes identically when gzip-compressed.
			gz, _, err := Decode(gzipBatch(t, b))
			if err != nil {
				t.Fatalf("Decode gzip: %v", err)
			}
			if gz.Compression() != CompressionGzip {
				t.Errorf("compression %s, want gzip", gz.Compression())
			}
			equalRecords(t, gz.Records, want, true)
		})
	}
}

func TestBuildErrors(t *testing.T) {
	for _, records := range [][]Record{nil, {}} {
		b, err := Build(records)
		if !errors.Is(err, ErrNoRecords) || b != nil {
			t.Errorf("Build(%v) = %v, %v; want nil, ErrNoRecords", records, b, err)
		}
	}
	dst := []byte("prefix")
	got, err := AppendBuild(dst, nil)
	if !errors.Is(err, ErrNoRecords) || string(got) != "prefix" {
		t.Errorf("AppendBuild(prefix, nil) = %q, %v", got, err)
	}
}

func TestAppendBuild(t *testing.T) {
	records := []Record{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2")}}
	want := mustBuild(t, records)
	prefix := []byte("prefix")
	got, err := AppendBuild(prefix, records)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want) {
		t.Fatalf("AppendBuild did not append the batch after the prefix")
	}

	// Appending a second batch makes a contiguous log.
	got, err = AppendBuild(got[len(prefix):], records)
	if err != nil {
		t.Fatal(err)
	}
	batches, err := DecodeAll(got)
	if err != nil || len(batches) != 2 {
		t.Fatalf("DecodeAll = %d batches, %v", len(batches), err)
	}

	// With room in dst, AppendBuild does not allocate.
	buf := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := AppendBuild(buf[:0], records); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("AppendBuild with capacity allocated %v times", allocs)
	}
}

func TestRecordSize(t *testing.T) {
	tests := []struct {
		name   string
		record Record
	}{
		{name: "null", record: Record{}},
		{name: "empty", record: Record{Key: []byte{}, Value: []byte{}}},
		{name: "small", record: Record{Timestamp: 123456789, Key: []byte("key"), Value: []byte("value")}},
		{name: "headers", record: Record{Value: []byte("v"), Headers: []Header{{Key: "h", Value: nil}, {Key: "i", Value: []byte("x")}}}},
		{name: "long value", record: Record{Value: make([]byte, 300)}}, // two-byte length varints
		{name: "huge value", record: Record{Value: make([]byte, 1<<20)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustBuild(t, []Record{tt.record})
			if got, want := RecordSize(tt.record), len(b)-HeaderSize; got != want {
				t.Errorf("RecordSize = %d, want %d", got, want)
			}
		})
	}
}

// TestSetProducer: the producer fields are written where Peek reads them,
// and the batch still verifies (they are inside the CRC).
func TestSetProducer(t *testing.T) {
	b, err := Build([]Record{{Value: []byte("a")}, {Value: []byte("b")}})
	if err != nil {
		t.Fatal(err)
	}
	SetProducer(b, 1<<40, 7, math.MaxInt32-1)
	info, err := Verify(b)
	if err != nil {
		t.Fatalf("Verify after SetProducer: %v", err)
	}
	if info.ProducerID != 1<<40 || info.ProducerEpoch != 7 || info.BaseSequence != math.MaxInt32-1 {
		t.Fatalf("producer fields %d/%d/%d", info.ProducerID, info.ProducerEpoch, info.BaseSequence)
	}
}
