package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
)

// logOf builds contiguous batches of the given sizes with dense offsets from
// 0, as a partition log would store them.
func logOf(t testing.TB, sizes ...int) []byte {
	t.Helper()
	var log []byte
	next := int64(0)
	for _, n := range sizes {
		records := make([]Record, n)
		for i := range records {
			records[i] = Record{Timestamp: next + int64(i), Value: []byte(fmt.Sprint("v", next+int64(i)))}
		}
		start := len(log)
		var err error
		log, err = AppendBuild(log, records)
		if err != nil {
			t.Fatal(err)
		}
		SetBaseOffset(log[start:], next)
		next += int64(n)
	}
	return log
}

func TestRecords(t *testing.T) {
	log := logOf(t, 3, 1, 4) // offsets 0-2, 3, 4-7
	tests := []struct {
		name  string
		from  int64
		max   int
		first int64
		n     int
	}{
		{name: "all", from: 0, max: 0, first: 0, n: 8},
		{name: "negative max is all", from: 0, max: -1, first: 0, n: 8},
		{name: "from middle of batch", from: 1, max: 0, first: 1, n: 7},
		{name: "from batch start", from: 3, max: 0, first: 3, n: 5},
		{name: "from last", from: 7, max: 0, first: 7, n: 1},
		{name: "past end", from: 8, max: 0, n: 0},
		{name: "max within batch", from: 0, max: 2, first: 0, n: 2},
		{name: "max across batches", from: 2, max: 3, first: 2, n: 3},
		{name: "max beyond end", from: 5, max: 10, first: 5, n: 3},
		{name: "negative from", from: -5, max: 1, first: 0, n: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Records(log, tt.from, tt.max)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.n {
				t.Fatalf("got %d records, want %d", len(got), tt.n)
			}
			for i, r := range got {
				want := tt.first + int64(i)
				if r.Offset != want || string(r.Value) != fmt.Sprint("v", want) || r.Timestamp != want {
					t.Errorf("record %d = offset %d value %q ts %d, want offset %d", i, r.Offset, r.Value, r.Timestamp, want)
				}
			}
		})
	}
}

func TestRecordsErrors(t *testing.T) {
	log := logOf(t, 3, 1, 4)
	second := len(logOf(t, 3))

	// A corrupt batch that is read is an error...
	bad := append([]byte(nil), log...)
	bad[second+HeaderSize+3] ^= 1
	if _, err := Records(bad, 0, 0); !errors.Is(err, ErrBadCRC) {
		t.Errorf("Records over a corrupt batch: %v, want ErrBadCRC", err)
	}
	// ...and so is a torn tail.
	if _, err := Records(log[:len(log)-1], 0, 0); !errors.Is(err, ErrTruncated) {
		t.Errorf("Records over a torn tail: %v, want ErrTruncated", err)
	}
	// A torn batch that would be skipped is still an error: the caller asked
	// for offsets beyond it.
	if _, err := Records(log[:second+20], 5, 0); !errors.Is(err, ErrTruncated) {
		t.Errorf("Records skipping a torn batch: %v, want ErrTruncated", err)
	}
	// Records stops once it has max, before a bad batch.
	if got, err := Records(bad, 0, 3); err != nil || len(got) != 3 {
		t.Errorf("Records(max 3) before a corrupt batch = %d, %v", len(got), err)
	}
	if got, err := Records(nil, 0, 0); err != nil || got != nil {
		t.Errorf("Records(nil) = %v, %v", got, err)
	}
}

func TestDecodeAll(t *testing.T) {
	log := logOf(t, 2, 5, 1)
	batches, err := DecodeAll(log)
	if err != nil {
		t.Fatal(err)
	}
	wantBase := []int64{0, 2, 7}
	if len(batches) != len(wantBase) {
		t.Fatalf("got %d batches, want %d", len(batches), len(wantBase))
	}
	for i, b := range batches {
		if b.BaseOffset != wantBase[i] || b.Records[0].Offset != wantBase[i] {
			t.Errorf("batch %d base %d first record %d, want %d", i, b.BaseOffset, b.Records[0].Offset, wantBase[i])
		}
	}
	if got, err := DecodeAll(nil); err != nil || got != nil {
		t.Errorf("DecodeAll(nil) = %v, %v", got, err)
	}
	if _, err := DecodeAll(log[:len(log)-1]); !errors.Is(err, ErrTruncated) {
		t.Errorf("DecodeAll of a torn tail: %v, want ErrTruncated", err)
	}
}

func TestPeekVerify(t *testing.T) {
	records := []Record{{Timestamp: 7, Value: []byte("a")}, {Timestamp: 9, Value: []byte("b")}, {Timestamp: 8}}
	b := mustBuild(t, records)
	SetBaseOffset(b, 100)
	SetPartitionLeaderEpoch(b, 3)

	// Peek needs only the header.
	info, err := Peek(b[:HeaderSize])
	if err != nil {
		t.Fatal(err)
	}
	want := Info{
		BaseOffset: 100, Length: len(b), PartitionLeaderEpoch: 3, Magic: 2,
		CRC: binary.BigEndian.Uint32(b[posCRC:]), LastOffsetDelta: 2, BaseTimestamp: 7, MaxTimestamp: 9,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 3,
	}
	if info != want {
		t.Fatalf("Peek = %+v\nwant %+v", info, want)
	}
	if info.LastOffset() != 102 || info.NextOffset() != 103 || info.Compression() != CompressionNone || info.IsControl() || info.IsTransactional() {
		t.Errorf("Info helpers wrong: last %d next %d", info.LastOffset(), info.NextOffset())
	}

	// Rewriting baseOffset and the leader epoch keeps the batch valid.
	if got, err := Verify(b); err != nil || got != want {
		t.Errorf("Verify = %+v, %v", got, err)
	}
	if _, err := Verify(b[:HeaderSize]); !errors.Is(err, ErrTruncated) {
		t.Errorf("Verify of a header only: %v, want ErrTruncated", err)
	}
	d, _, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if d.Records[2].Offset != 102 || d.PartitionLeaderEpoch != 3 || d.LastOffset() != 102 {
		t.Errorf("decoded offsets %d, epoch %d", d.Records[2].Offset, d.PartitionLeaderEpoch)
	}
}

func TestDecodeAttributes(t *testing.T) {
	b := mustBuild(t, []Record{{Timestamp: 1, Value: []byte("x")}, {Timestamp: 5, Value: []byte("y")}})
	// LogAppendTime, transactional and control: every record takes
	// maxTimestamp, as in Kafka.
	binary.BigEndian.PutUint16(b[posAttributes:], timestampTypeBit|transactionalBit|controlBit)
	binary.BigEndian.PutUint64(b[posMaxTimestamp:], 99)
	fixCRC(b)
	d, _, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !d.LogAppendTime() || !d.IsTransactional() || !d.IsControl() {
		t.Errorf("attribute helpers wrong for %#x", d.Attributes)
	}
	for i, r := range d.Records {
		if r.Timestamp != 99 {
			t.Errorf("record %d timestamp %d, want 99 (log append time)", i, r.Timestamp)
		}
	}
}

func TestDecodeCompactedBatch(t *testing.T) {
	// Compaction keeps a batch's offset range but may drop records: offsets
	// 0 and 3 of a 4-slot batch remain.
	b := mustBuild(t, []Record{{Value: []byte("a")}, {Value: []byte("b")}})
	binary.BigEndian.PutUint32(b[posLastOffsetDelta:], 3)
	rec1 := HeaderSize + 1 + int(b[HeaderSize])>>1 // start of the second record
	b[rec1+3] = 3 << 1                             // its offsetDelta
	fixCRC(b)
	d, _, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if d.Records[0].Offset != 0 || d.Records[1].Offset != 3 || d.LastOffset() != 3 {
		t.Errorf("offsets %d, %d, last %d; want 0, 3, 3", d.Records[0].Offset, d.Records[1].Offset, d.LastOffset())
	}
	got, err := Records(b, 1, 0)
	if err != nil || len(got) != 1 || got[0].Offset != 3 {
		t.Errorf("Records from 1 = %v, %v; want the record at 3", got, err)
	}
}

func TestDecodeAliasesInput(t *testing.T) {
	b := mustBuild(t, []Record{{Key: []byte("k"), Value: []byte("value")}})
	d, _, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	v := d.Records[0].Value
	if cap(v) != len(v) {
		t.Errorf("value capacity %d not clipped to %d", cap(v), len(v))
	}
	b[len(b)-2] = 'E'
	if string(v) != "valuE" {
		t.Errorf("value %q does not alias the input", v)
	}
}
