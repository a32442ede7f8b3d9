package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// codecs are the codecs Kafka defines, each of which Decode reads.
var codecs = []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}

// manyRecords is a batch large enough that every codec compresses it into
// several blocks or matches.
func manyRecords(t testing.TB, n int) []Record {
	t.Helper()
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{
			Timestamp: 1_700_000_000_000 + int64(i%7),
			Key:       []byte(fmt.Sprintf("key-%d", i%13)),
			Value:     bytes.Repeat([]byte(fmt.Sprintf("value %d;", i)), 1+i%9),
			Headers:   []Header{{Key: "h", Value: []byte{byte(i)}}, {Key: "null"}},
		}
	}
	recs[0].Key, recs[1].Value = nil, nil
	return recs
}

// compressed returns b re-encoded with c, or fails the test.
func compressed(t testing.TB, b []byte, c Compression) []byte {
	t.Helper()
	out, err := Compress(b, c)
	if err != nil {
		t.Fatalf("Compress %s: %v", c, err)
	}
	return out
}

// xerial frames data as Kafka's Java producer does: the xerial header,
// then data in raw snappy blocks of at most blockSize bytes each.
func xerial(data []byte, blockSize int) []byte {
	out := append([]byte(nil), xerialMagic...)
	out = binary.BigEndian.AppendUint32(out, 1) // version
	out = binary.BigEndian.AppendUint32(out, 1) // compatible version
	for len(data) > 0 {
		n := min(blockSize, len(data))
		block := snappy.Encode(nil, data[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
		data = data[n:]
	}
	return out
}

// withBody returns the header of b (its records' codec set to c) followed
// by body as the record section, with length and CRC fixed.
func withBody(b []byte, c Compression, body []byte) []byte {
	out := append(bytes.Clone(b[:HeaderSize]), body...)
	attrs := binary.BigEndian.Uint16(out[posAttributes:])
	binary.BigEndian.PutUint16(out[posAttributes:], attrs&^compressionMask|uint16(c))
	fixLength(out)
	return out
}

func TestCompressRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name    string
		records []Record
	}{
		{"sample", []Record{
			{Timestamp: 10, Key: []byte("key"), Value: []byte("value"), Headers: []Header{{Key: "h", Value: []byte("v")}}},
			{Timestamp: 11, Value: []byte("second")},
		}},
		{"empty key and value", []Record{{Key: []byte{}, Value: []byte{}}}},
		{"2000 records", manyRecords(t, 2000)},
	} {
		plain := mustBuild(t, tc.records)
		SetBaseOffset(plain, 100)
		for _, c := range codecs {
			t.Run(tc.name+"/"+c.String(), func(t *testing.T) {
				b := compressed(t, plain, c)
				got, n, err := Decode(b)
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if n != len(b) || got.Compression() != c {
					t.Fatalf("consumed %d of %d bytes, codec %s", n, len(b), got.Compression())
				}
				if c != CompressionNone && len(tc.records) > 100 && len(b) >= len(plain) {
					t.Errorf("%s: %d bytes from %d uncompressed", c, len(b), len(plain))
				}
				if !bytes.Equal(b[:posBatchLength], plain[:posBatchLength]) || !bytes.Equal(b[posLeaderEpoch:posCRC], plain[posLeaderEpoch:posCRC]) ||
					!bytes.Equal(b[posLastOffsetDelta:HeaderSize], plain[posLastOffsetDelta:HeaderSize]) {
					t.Errorf("header changed:\n got %x\nwant %x", b[:HeaderSize], plain[:HeaderSize])
				}
				equalRecords(t, got.Records, tc.records, false)
				for i, r := range got.Records {
					if r.Offset != 100+int64(i) {
						t.Fatalf("record %d at offset %d", i, r.Offset)
					}
				}
				// Compaction rewrites a compressed batch uncompressed.
				kept, err := Filter(b, func(r *Record) bool { return r.Offset%2 == 0 })
				if err != nil {
					t.Fatalf("Filter: %v", err)
				}
				fb, _, err := Decode(kept)
				if err != nil || fb.Compression() != CompressionNone || len(fb.Records) != (len(tc.records)+1)/2 {
					t.Fatalf("filtered: %s, %d records, %v", fb.Compression(), len(fb.Records), err)
				}
			})
		}
	}
}

func TestCompressRefuses(t *testing.T) {
	b := sample(t)
	if _, err := Compress(compressed(t, b, CompressionZstd), CompressionGzip); err == nil {
		t.Error("a compressed batch compressed again")
	}
	if _, err := Compress(b, 5); !errors.Is(err, ErrUnsupportedCompression) {
		t.Errorf("codec 5: %v", err)
	}
	if _, err := Compress(b[:len(b)-1], CompressionLZ4); !errors.Is(err, ErrTruncated) {
		t.Errorf("truncated: %v", err)
	}
}

// TestDecodeSnappyFramings: Kafka's Java producer frames snappy as xerial
// snappy-java does, in blocks (32 KiB by default); librdkafka and franz-go
// write one raw block. Both decode to the same records.
func TestDecodeSnappyFramings(t *testing.T) {
	recs := manyRecords(t, 500)
	plain := mustBuild(t, recs)
	for _, blockSize := range []int{1 << 15, 1000, 1} {
		b := withBody(plain, CompressionSnappy, xerial(plain[HeaderSize:], blockSize))
		got, _, err := Decode(b)
		if err != nil {
			t.Fatalf("xerial blocks of %d: %v", blockSize, err)
		}
		equalRecords(t, got.Records, recs, false)
	}
	framed := xerial(plain[HeaderSize:], 1<<15)
	for name, body := range map[string][]byte{
		"header cut":           framed[:10],
		"block length cut":     framed[:xerialHeaderSize+2],
		"block cut":            framed[:len(framed)-1],
		"block length too big": binary.BigEndian.AppendUint32(bytes.Clone(framed[:xerialHeaderSize]), 1<<30),
		"raw garbage":          []byte("not snappy at all"),
		"s2 repeat offset":     {8, 0x00, 'a', 0x01, 0x00}, // a copy at offset 0: an s2 extension, not snappy
	} {
		if _, _, err := Decode(withBody(plain, CompressionSnappy, body)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// decodeAllocates decodes b, which must fail as corrupt, and returns the
// bytes it allocated meanwhile.
func decodeAllocates(t *testing.T, b []byte) uint64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err := Decode(b)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Decode error = %v, want ErrCorrupt", err)
	}
	return after.TotalAlloc - before.TotalAlloc
}

// TestDecodeBombs: a batch whose records would inflate past
// MaxUncompressedSize is refused by every codec while it inflates. Each
// bomb here inflates to 1 GiB, or declares more than the bound; what
// Decode allocates stays within about three times the bound (the output
// buffer doubling up to it), where a check after inflating would allocate
// the whole gigabyte.
func TestDecodeBombs(t *testing.T) {
	const inflated = 1 << 30
	zeros := make([]byte, 8<<20)
	head := sample(t)
	repeat := func(frame []byte) []byte { return bytes.Repeat(frame, inflated/len(zeros)) }

	var lz4Frame bytes.Buffer
	zw := lz4.NewWriter(&lz4Frame)
	if _, err := zw.Write(zeros); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	zstdFrame := enc.EncodeAll(zeros, nil)
	enc.Close()
	zstdUnsized, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithSingleSegment(false))
	if err != nil {
		t.Fatal(err)
	}
	var unsized bytes.Buffer
	zstdUnsized.Reset(&unsized)
	if _, err := zstdUnsized.Write(zeros); err != nil {
		t.Fatal(err)
	}
	if err := zstdUnsized.Close(); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(unsized.Bytes()[:5], zstdFrame[:5]) {
		t.Fatal("the streamed frame's header is the sized frame's")
	}

	const slack = 3*MaxUncompressedSize + 16<<20
	for _, tc := range []struct {
		name  string
		c     Compression
		body  []byte
		limit uint64 // allocation allowed
	}{
		// Snappy blocks declare their decoded length: refused before
		// decoding, without allocating the output.
		{"snappy raw block declaring 1 GiB", CompressionSnappy, append(binary.AppendUvarint(nil, inflated), make([]byte, 64<<10)...), 1 << 20},
		{"snappy xerial blocks adding up past the bound", CompressionSnappy, xerialDeclaring(t, MaxUncompressedSize/(1<<20)+36, 1<<20), 1 << 20},
		{"lz4 frames of zeros", CompressionLZ4, repeat(lz4Frame.Bytes()), slack},
		{"zstd frames with their content size", CompressionZstd, repeat(zstdFrame), slack},
		{"zstd frames without a content size", CompressionZstd, repeat(unsized.Bytes()), slack},
		// A frame declaring a content size past the bound is refused
		// before anything is allocated for it.
		{"zstd frame declaring 1 GiB", CompressionZstd, zstdHeader(0xe0, binary.LittleEndian.AppendUint64(nil, inflated)), 1 << 20},
		// And one asking for a window past the decoder's 8 MiB.
		{"zstd 16 MiB window", CompressionZstd, zstdHeader(0x00, []byte{14 << 3}), 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := withBody(head, tc.c, tc.body)
			if got := decodeAllocates(t, b); got > tc.limit {
				t.Errorf("Decode allocated %d MiB refusing a %d KiB batch", got>>20, len(b)>>10)
			}
		})
	}
}

// xerialDeclaring is xerial framing of n blocks, each declaring size
// decoded bytes (the declaration is all a bomb needs: the blocks' content
// is never read).
func xerialDeclaring(t *testing.T, n, size int) []byte {
	t.Helper()
	block := snappy.Encode(nil, make([]byte, size))
	out := bytes.Clone(xerial(nil, 1))
	for range n {
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
	}
	return out
}

// zstdHeader is a zstd frame with the given frame header descriptor and
// the fields it announces, then one last raw block of one byte.
func zstdHeader(descriptor byte, fields []byte) []byte {
	out := []byte{0x28, 0xb5, 0x2f, 0xfd, descriptor}
	out = append(out, fields...)
	return append(out, 1<<3|1, 0, 0, 'x') // block header: size 1, raw, last
}
