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

// FuzzDecodeSnappy, FuzzDecodeLZ4 and FuzzDecodeZstd fuzz the compressed
// record section of a batch of each codec behind a valid header (length
// and CRC fixed, so mutations reach the decompressor): Decode never
// panics, refuses with ErrCorrupt only, and the records it accepts come
// back unchanged from a batch built and compressed again. The seeds are
// real compressed sections (snappy's in both framings).
func FuzzDecodeSnappy(f *testing.F) { fuzzCodec(f, CompressionSnappy) }

// FuzzDecodeLZ4 is FuzzDecodeSnappy for lz4.
func FuzzDecodeLZ4(f *testing.F) { fuzzCodec(f, CompressionLZ4) }

// FuzzDecodeZstd is FuzzDecodeSnappy for zstd.
func FuzzDecodeZstd(f *testing.F) { fuzzCodec(f, CompressionZstd) }

func fuzzCodec(f *testing.F, c Compression) {
	for _, recs := range [][]Record{{{}}, {{Key: []byte("k"), Value: []byte("v"), Headers: []Header{{Key: "h"}}}}, manyRecords(f, 40)} {
		plain := mustBuild(f, recs)
		f.Add(compressed(f, plain, c)[HeaderSize:], int32(len(recs)))
		if c == CompressionSnappy {
			f.Add(xerial(plain[HeaderSize:], 100), int32(len(recs)))
		}
	}
	head := sample(f)
	f.Fuzz(func(t *testing.T, body []byte, count int32) {
		b := withBody(head, c, body)
		putCount(b, count)
		binary.BigEndian.PutUint32(b[posLastOffsetDelta:], uint32(max(count-1, 0)))
		fixCRC(b)
		got, _, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Decode error %v, want ErrCorrupt", err)
			}
			return
		}
		if len(got.Records) != int(count) || got.Compression() != c {
			t.Fatalf("decoded %d %s records, header says %d %s", len(got.Records), got.Compression(), count, c)
		}
		if len(got.Records) == 0 {
			return
		}
		again, _, err := Decode(compressed(t, mustBuild(t, got.Records), c))
		if err != nil {
			t.Fatalf("Decode of the records compressed again: %v", err)
		}
		equalRecords(t, again.Records, got.Records, false)
	})
}
