package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// FuzzDecode checks that Decode never panics, that any error matches one of
// the package's sentinels, and that records it accepts survive a re-Build
// unchanged (apart from offsets, which Build makes dense). The seed corpus
// is in testdata/fuzz/FuzzDecode; more seeds are added below.
func FuzzDecode(f *testing.F) {
	f.Add(sample(f))
	f.Add(gzipBatch(f, sample(f)))
	f.Add(mustBuild(f, []Record{{}}))
	f.Add(mustBuild(f, []Record{{Key: []byte{}, Value: []byte{}, Headers: []Header{{Key: "", Value: nil}}}}))
	for _, tt := range saramaBatches {
		f.Add(tt.encoded)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, n, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrBadCRC) &&
				!errors.Is(err, ErrBadMagic) && !errors.Is(err, ErrUnsupportedCompression) {
				t.Fatalf("Decode error %v matches no sentinel", err)
			}
			return
		}
		if n < HeaderSize || n > len(b) {
			t.Fatalf("Decode consumed %d of %d bytes", n, len(b))
		}
		if _, err := Verify(b); err != nil {
			t.Fatalf("Decode accepted what Verify rejects: %v", err)
		}
		if len(got.Records) == 0 {
			return // Build refuses empty batches.
		}
		rebuilt, err := Build(got.Records)
		if err != nil {
			t.Fatalf("Build of decoded records: %v", err)
		}
		again, m, err := Decode(rebuilt)
		if err != nil {
			t.Fatalf("Decode of rebuilt batch: %v", err)
		}
		if m != len(rebuilt) {
			t.Fatalf("rebuilt batch: consumed %d of %d", m, len(rebuilt))
		}
		equalRecords(t, again.Records, got.Records, false)
		for i, r := range again.Records {
			if r.Offset != int64(i) {
				t.Fatalf("rebuilt record %d has offset %d", i, r.Offset)
			}
		}
	})
}

// FuzzDecodeRecords fuzzes the record section behind a valid header: it
// fixes the length and CRC so that mutations reach the record parser
// instead of failing the checksum.
func FuzzDecodeRecords(f *testing.F) {
	for _, b := range [][]byte{sample(f), mustBuild(f, []Record{{}}), saramaBatches[2].encoded} {
		f.Add(b[HeaderSize:], int32(binary.BigEndian.Uint32(b[posRecordCount:])), int32(binary.BigEndian.Uint32(b[posLastOffsetDelta:])), false)
	}
	f.Fuzz(func(t *testing.T, records []byte, count, lastOffsetDelta int32, gzipped bool) {
		b := append(bytes.Clone(sample(t)[:HeaderSize]), records...)
		putCount(b, count)
		binary.BigEndian.PutUint32(b[posLastOffsetDelta:], uint32(lastOffsetDelta))
		fixLength(b)
		if gzipped {
			b = gzipBatch(t, b)
		}
		got, _, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Decode error %v, want ErrCorrupt", err)
			}
			return
		}
		if len(got.Records) != int(count) {
			t.Fatalf("decoded %d records, header says %d", len(got.Records), count)
		}
		if len(got.Records) == 0 {
			return
		}
		again, _, err := Decode(mustBuild(t, got.Records))
		if err != nil {
			t.Fatalf("Decode of rebuilt batch: %v", err)
		}
		equalRecords(t, again.Records, got.Records, false)
	})
}
