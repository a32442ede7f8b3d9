package batch

import (
	"bytes"
	"testing"
)

// benchRecords returns 1000 records with 16-byte keys and 128-byte values.
func benchRecords() []Record {
	records := make([]Record, 1000)
	for i := range records {
		records[i] = Record{
			Timestamp: 1_700_000_000_000 + int64(i),
			Key:       []byte("key-0000000000000"),
			Value:     bytes.Repeat([]byte{byte(i)}, 128),
		}
	}
	return records
}

func BenchmarkBuild(b *testing.B) {
	records := benchRecords()
	buf, err := Build(records)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf, err = AppendBuild(buf[:0], records)
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	buf, err := Build(benchRecords())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	buf, err := Build(benchRecords())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Verify(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecords reads 1000 records from the middle of a read of four
// batches of 500, as a fetch of records (server) or of batches (client)
// decodes one.
func BenchmarkRecords(b *testing.B) {
	records := benchRecords()
	var buf []byte
	for i := range 4 {
		start := len(buf)
		var err error
		if buf, err = AppendBuild(buf, records[:500]); err != nil {
			b.Fatal(err)
		}
		SetBaseOffset(buf[start:], int64(i*500))
	}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		recs, err := Records(buf, 250, 1000)
		if err != nil || len(recs) != 1000 {
			b.Fatal(len(recs), err)
		}
	}
}
