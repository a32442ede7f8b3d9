package batch

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"
)

// sample is a small batch exercising keys, values and headers.
func sample(t testing.TB) []byte {
	return mustBuild(t, []Record{
		{Timestamp: 10, Key: []byte("key"), Value: []byte("value"), Headers: []Header{{Key: "h", Value: []byte("v")}}},
		{Timestamp: 11, Value: []byte("second")},
	})
}

func TestDecodeHostile(t *testing.T) {
	// Each case edits a valid batch. Cases that call fixCRC or fixLength
	// recompute the CRC so that the edit reaches the checks behind it.
	tests := []struct {
		name string
		edit func(b []byte) []byte
		want error
	}{
		{name: "empty input", edit: func(b []byte) []byte { return nil }, want: ErrTruncated},
		{name: "length only", edit: func(b []byte) []byte { return b[:12] }, want: ErrTruncated},
		{name: "header only", edit: func(b []byte) []byte { return b[:HeaderSize] }, want: ErrTruncated},
		{name: "last byte missing", edit: func(b []byte) []byte { return b[:len(b)-1] }, want: ErrTruncated},
		{name: "length below header", edit: func(b []byte) []byte { binary.BigEndian.PutUint32(b[posBatchLength:], 48); return b }, want: ErrCorrupt},
		{name: "negative length", edit: func(b []byte) []byte { binary.BigEndian.PutUint32(b[posBatchLength:], 0xffffffff); return b }, want: ErrCorrupt},
		{name: "huge length", edit: func(b []byte) []byte { binary.BigEndian.PutUint32(b[posBatchLength:], 0x7fffffff); return b }, want: ErrCorrupt},
		{name: "magic 1", edit: func(b []byte) []byte { b[posMagic] = 1; return b }, want: ErrBadMagic},
		{name: "flipped crc", edit: func(b []byte) []byte { b[posCRC] ^= 1; return b }, want: ErrBadCRC},
		{name: "flipped value byte", edit: func(b []byte) []byte { b[len(b)-3] ^= 0x40; return b }, want: ErrBadCRC},
		{name: "flipped attribute bit", edit: func(b []byte) []byte { b[posAttributes+1] ^= timestampTypeBit; return b }, want: ErrBadCRC},
		{name: "codec 5", edit: func(b []byte) []byte { b[posAttributes+1] |= 5; fixCRC(b); return b }, want: ErrCorrupt},
		{name: "lz4 garbage", edit: func(b []byte) []byte { b[posAttributes+1] |= 3; fixCRC(b); return b }, want: ErrCorrupt},
		{name: "zstd garbage", edit: func(b []byte) []byte { b[posAttributes+1] |= 4; fixCRC(b); return b }, want: ErrCorrupt},
		{name: "snappy garbage", edit: func(b []byte) []byte { b[posAttributes+1] |= 2; fixCRC(b); return b }, want: ErrCorrupt},
		{name: "gzip garbage", edit: func(b []byte) []byte { b[posAttributes+1] |= 1; fixCRC(b); return b }, want: ErrCorrupt},
		{name: "record count huge", edit: func(b []byte) []byte {
			putCount(b, 0x7fffffff)
			binary.BigEndian.PutUint32(b[posLastOffsetDelta:], 0x7ffffffe)
			fixCRC(b)
			return b
		}, want: ErrCorrupt},
		{name: "record count negative", edit: func(b []byte) []byte { putCount(b, -1); fixCRC(b); return b }, want: ErrCorrupt},
		{name: "record count above offset range", edit: func(b []byte) []byte { putCount(b, 3); fixCRC(b); return b }, want: ErrCorrupt},
		{name: "record count too low", edit: func(b []byte) []byte { putCount(b, 1); fixCRC(b); return b }, want: ErrCorrupt},
		{name: "record count zero with records", edit: func(b []byte) []byte { putCount(b, 0); fixCRC(b); return b }, want: ErrCorrupt},
		{name: "negative last offset delta", edit: func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[posLastOffsetDelta:], 0xffffffff)
			fixCRC(b)
			return b
		}, want: ErrCorrupt},
		{name: "last offset delta below records", edit: func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[posLastOffsetDelta:], 0)
			putCount(b, 1)
			b = b[:HeaderSize+16]
			fixLength(b)
			putCount(b, 2)
			fixCRC(b)
			return b
		}, want: ErrCorrupt},
		{name: "trailing garbage in batch", edit: func(b []byte) []byte { b = append(b, 0); fixLength(b); return b }, want: ErrCorrupt},
		{name: "record cut short", edit: func(b []byte) []byte { b = b[:len(b)-1]; fixLength(b); return b }, want: ErrCorrupt},
		{name: "record length too long", edit: func(b []byte) []byte { b[HeaderSize] = 0x7e; fixCRC(b); return b }, want: ErrCorrupt},
		{name: "record length negative", edit: func(b []byte) []byte { b[HeaderSize] = 0x01; fixCRC(b); return b }, want: ErrCorrupt},
		{name: "record length short", edit: func(b []byte) []byte { b[HeaderSize] -= 2; fixCRC(b); return b }, want: ErrCorrupt},
		{name: "key length past record", edit: func(b []byte) []byte { b[HeaderSize+4] = 0x7e; fixCRC(b); return b }, want: ErrCorrupt},
		{name: "key length -2", edit: func(b []byte) []byte { b[HeaderSize+4] = 0x03; fixCRC(b); return b }, want: ErrCorrupt},
		{name: "offset delta repeated", edit: func(b []byte) []byte { b[len(b)-10] = 0; fixCRC(b); return b }, want: ErrCorrupt},
		{name: "offset delta past last", edit: func(b []byte) []byte { b[len(b)-10] = 4; fixCRC(b); return b }, want: ErrCorrupt},
		{name: "overlong varint", edit: func(b []byte) []byte {
			b = append(b[:HeaderSize:HeaderSize], 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)
			putCount(b, 1)
			fixLength(b)
			return b
		}, want: ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.edit(sample(t))
			_, _, err := Decode(b)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Decode error = %v, want %v", err, tt.want)
			}
			// A batch whose header and CRC hold fails DecodeVerified
			// as it fails Decode: the checks behind the CRC are the same.
			if info, verr := Verify(b); verr == nil {
				if _, _, err := DecodeVerified(b, info); !errors.Is(err, tt.want) {
					t.Errorf("DecodeVerified error = %v, want %v", err, tt.want)
				}
			}
			if len(b) == 0 {
				return // DecodeAll of nothing is no batches.
			}
			if _, err := DecodeAll(b); !errors.Is(err, tt.want) {
				t.Errorf("DecodeAll error = %v, want %v", err, tt.want)
			}
		})
	}
}

func putCount(b []byte, n int32) { binary.BigEndian.PutUint32(b[posRecordCount:], uint32(n)) }

func TestSampleLayout(t *testing.T) {
	// The offset-delta cases above edit the second record's offsetDelta,
	// 10 bytes from the end (offsetDelta, null key, value length, "second",
	// header count). Guard that layout.
	b := sample(t)
	if b[len(b)-10] != 0x02 || string(b[len(b)-7:len(b)-1]) != "second" {
		t.Fatalf("sample layout changed: % x", b[HeaderSize:])
	}
}

func TestDecodeEveryPrefixAndBitFlip(t *testing.T) {
	b := sample(t)
	for i := 0; i < len(b); i++ {
		if _, _, err := Decode(b[:i]); !errors.Is(err, ErrTruncated) {
			t.Errorf("prefix %d: error %v, want ErrTruncated", i, err)
		}
	}
	// A flipped bit anywhere is detected: the CRC covers bytes 21.., the
	// header checks the rest, except baseOffset and the leader epoch.
	for i := posBatchLength; i < len(b); i++ {
		if i >= posLeaderEpoch && i < posMagic {
			continue
		}
		for bit := range 8 {
			c := bytes.Clone(b)
			c[i] ^= 1 << bit
			if _, _, err := Decode(c); err == nil {
				t.Errorf("byte %d bit %d flipped: no error", i, bit)
			}
		}
	}
}

func TestDecodeDoesNotAllocateByClaimedCount(t *testing.T) {
	tests := []struct {
		name string
		make func() []byte
	}{
		{name: "record count", make: func() []byte {
			b := sample(t)
			putCount(b, 0x7fffffff)
			binary.BigEndian.PutUint32(b[posLastOffsetDelta:], 0x7ffffffe)
			fixCRC(b)
			return b
		}},
		{name: "gzip record count", make: func() []byte {
			b := gzipBatch(t, sample(t))
			putCount(b, 0x7fffffff)
			binary.BigEndian.PutUint32(b[posLastOffsetDelta:], 0x7ffffffe)
			fixCRC(b)
			return b
		}},
		{name: "header count", make: func() []byte {
			// One record claiming 2^30 headers.
			rec := []byte{0, 0, 0, 1, 1, 0x80, 0x80, 0x80, 0x80, 0x08}
			b := append(bytes.Clone(sample(t)[:HeaderSize]), byte(len(rec)<<1))
			b = append(b, rec...)
			putCount(b, 1)
			fixLength(b)
			return b
		}},
		{name: "key length", make: func() []byte {
			rec := []byte{0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 0x0f, 1, 0}
			b := append(bytes.Clone(sample(t)[:HeaderSize]), byte(len(rec)<<1))
			b = append(b, rec...)
			putCount(b, 1)
			fixLength(b)
			return b
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.make()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, _, err := Decode(b)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("Decode error = %v, want ErrCorrupt", err)
			}
			// gzip.NewReader allocates its window (~40 KiB); anything
			// proportional to the claimed count would be gigabytes.
			if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
				t.Errorf("Decode allocated %d bytes", got)
			}
		})
	}
}

func TestDecodeGzipBomb(t *testing.T) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	zeros := make([]byte, 1<<20)
	for written := 0; written <= MaxUncompressedSize; written += len(zeros) {
		if _, err := zw.Write(zeros); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	b := append(bytes.Clone(sample(t)[:HeaderSize]), buf.Bytes()...)
	b[posAttributes+1] |= byte(CompressionGzip)
	putCount(b, 1)
	fixLength(b)
	_, _, err = Decode(b)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Decode error = %v, want ErrCorrupt", err)
	}
}

func TestDecodeErrorDetails(t *testing.T) {
	b := sample(t)
	SetBaseOffset(b, 42)
	b[len(b)-1] ^= 0xff
	_, _, err := Decode(b)
	var crcErr *CRCError
	if !errors.As(err, &crcErr) || crcErr.BaseOffset != 42 || crcErr.Stored == crcErr.Computed {
		t.Errorf("error %#v, want a CRCError at base offset 42", err)
	}

	b = sample(t)
	b[posMagic] = 0
	var magicErr *MagicError
	if _, _, err := Decode(b); !errors.As(err, &magicErr) || magicErr.Magic != 0 {
		t.Errorf("error %v, want MagicError{0}", err)
	}

	var truncErr *TruncatedError
	if _, _, err := Decode(sample(t)[:70]); !errors.As(err, &truncErr) || truncErr.Have != 70 || truncErr.Need != len(sample(t)) {
		t.Errorf("error %v, want TruncatedError{Need: %d, Have: 70}", err, len(sample(t)))
	}

	b = sample(t)
	b = append(b, 0)
	fixLength(b)
	var corruptErr *CorruptError
	if _, _, err := Decode(b); !errors.As(err, &corruptErr) || corruptErr.Pos != len(b)-1 {
		t.Errorf("error %v, want CorruptError at byte %d", err, len(b)-1)
	}
}

// TestDecodeVerified: for a verified batch, DecodeVerified answers what
// Decode answers, and refuses a header that does not fit the bytes.
func TestDecodeVerified(t *testing.T) {
	for name, b := range map[string][]byte{"plain": sample(t), "gzip": gzipBatch(t, sample(t))} {
		t.Run(name, func(t *testing.T) {
			want, wantN, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			info, err := Verify(b)
			if err != nil {
				t.Fatal(err)
			}
			got, n, err := DecodeVerified(b, info)
			if err != nil || n != wantN || got.BaseOffset != want.BaseOffset || got.Attributes != want.Attributes {
				t.Fatalf("DecodeVerified = %+v, %d, %v; Decode %+v, %d", got, n, err, want, wantN)
			}
			equalRecords(t, got.Records, want.Records, true)
			if _, _, err := DecodeVerified(b[:len(b)-1], info); !errors.Is(err, ErrTruncated) {
				t.Errorf("DecodeVerified of a cut batch: %v, want ErrTruncated", err)
			}
		})
	}
}
