package batch

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// mustBuild builds records or fails the test.
func mustBuild(t testing.TB, records []Record) []byte {
	t.Helper()
	b, err := Build(records)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return b
}

// fixCRC recomputes the CRC of the batch at the start of b after a test
// edited it, so that the edit reaches the structural checks.
func fixCRC(b []byte) {
	n := int(binary.BigEndian.Uint32(b[posBatchLength:])) + lengthPrefix
	binary.BigEndian.PutUint32(b[posCRC:], crc32.Checksum(b[crcStart:n], crc32.MakeTable(crc32.Castagnoli)))
}

// fixLength sets batchLength to len(b)-12 and recomputes the CRC.
func fixLength(b []byte) {
	binary.BigEndian.PutUint32(b[posBatchLength:], uint32(len(b)-lengthPrefix))
	fixCRC(b)
}

// gzipBatch re-encodes an uncompressed batch with gzip-compressed records.
func gzipBatch(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b[HeaderSize:]); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	out := append(bytes.Clone(b[:HeaderSize]), buf.Bytes()...)
	attrs := binary.BigEndian.Uint16(out[posAttributes:])
	binary.BigEndian.PutUint16(out[posAttributes:], attrs&^compressionMask|uint16(CompressionGzip))
	fixLength(out)
	return out
}

// equalRecords compares the content Build encodes: timestamps, keys, values
// and headers, telling null from empty. Offsets are compared only if
// withOffsets.
func equalRecords(t testing.TB, got, want []Record, withOffsets bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if withOffsets && g.Offset != w.Offset {
			t.Errorf("record %d: offset %d, want %d", i, g.Offset, w.Offset)
		}
		if g.Timestamp != w.Timestamp {
			t.Errorf("record %d: timestamp %d, want %d", i, g.Timestamp, w.Timestamp)
		}
		if !sameNullable(g.Key, w.Key) {
			t.Errorf("record %d: key %q (nil %t), want %q (nil %t)", i, g.Key, g.Key == nil, w.Key, w.Key == nil)
		}
		if !sameNullable(g.Value, w.Value) {
			t.Errorf("record %d: value %q (nil %t), want %q (nil %t)", i, g.Value, g.Value == nil, w.Value, w.Value == nil)
		}
		if len(g.Headers) != len(w.Headers) {
			t.Errorf("record %d: %d headers, want %d", i, len(g.Headers), len(w.Headers))
			continue
		}
		for j := range w.Headers {
			if g.Headers[j].Key != w.Headers[j].Key || !sameNullable(g.Headers[j].Value, w.Headers[j].Value) {
				t.Errorf("record %d header %d: %q=%q, want %q=%q", i, j, g.Headers[j].Key, g.Headers[j].Value, w.Headers[j].Key, w.Headers[j].Value)
			}
		}
	}
}

func sameNullable(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}
