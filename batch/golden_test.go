package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

// crc32cBitwise is a bit-at-a-time CRC-32C (reflected polynomial
// 0x82F63B78), independent of hash/crc32's tables and assembly.
func crc32cBitwise(b []byte) uint32 {
	crc := ^uint32(0)
	for _, c := range b {
		crc ^= uint32(c)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0x82F63B78
			} else {
				crc >>= 1
			}
		}
	}
	return ^crc
}

func TestCRC32C(t *testing.T) {
	// The standard check value of CRC-32C.
	const check = 0xE3069283
	if got := crc32cBitwise([]byte("123456789")); got != check {
		t.Fatalf("bitwise CRC-32C = %#x, want %#x", got, check)
	}
	if got := crc32.Checksum([]byte("123456789"), castagnoli); got != check {
		t.Fatalf("package CRC-32C = %#x, want %#x", got, check)
	}
}

// TestBuildGolden checks Build byte for byte against a batch encoded by hand
// from the specification, with a CRC computed by an independent
// implementation.
func TestBuildGolden(t *testing.T) {
	records := []Record{
		{Timestamp: 1000, Key: []byte("k"), Value: []byte("v"), Headers: []Header{{Key: "h", Value: []byte("x")}}},
		{Timestamp: 998}, // null key and value, negative timestamp delta
	}
	want := []byte{
		0, 0, 0, 0, 0, 0, 0, 0, // baseOffset 0
		0, 0, 0, 69, // batchLength = 81 - 12
		0, 0, 0, 0, // partitionLeaderEpoch
		2,                      // magic
		0xe2, 0x66, 0x79, 0xb2, // crc
		0, 0, // attributes
		0, 0, 0, 1, // lastOffsetDelta
		0, 0, 0, 0, 0, 0, 0x03, 0xe8, // baseTimestamp 1000
		0, 0, 0, 0, 0, 0, 0x03, 0xe8, // maxTimestamp 1000
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // producerId -1
		0xff, 0xff, // producerEpoch -1
		0xff, 0xff, 0xff, 0xff, // baseSequence -1
		0, 0, 0, 2, // recordCount
		// record 0
		0x18,      // length 12
		0,         // attributes
		0,         // timestampDelta 0
		0,         // offsetDelta 0
		0x02, 'k', // key length 1
		0x02, 'v', // value length 1
		0x02,      // 1 header
		0x02, 'h', // header key length 1
		0x02, 'x', // header value length 1
		// record 1
		0x0c, // length 6
		0,    // attributes
		0x03, // timestampDelta -2
		0x02, // offsetDelta 1
		0x01, // key length -1 (null)
		0x01, // value length -1 (null)
		0x00, // 0 headers
	}
	if got := crc32cBitwise(want[crcStart:]); got != binary.BigEndian.Uint32(want[posCRC:]) {
		t.Fatalf("golden CRC %#x does not match bitwise CRC %#x", binary.BigEndian.Uint32(want[posCRC:]), got)
	}
	got := mustBuild(t, records)
	if !bytes.Equal(got, want) {
		t.Fatalf("Build:\n got % x\nwant % x", got, want)
	}
}

// Batches published in the test suite of IBM/sarama (record_batch_test.go),
// produced by an independent encoder: they check the CRC coverage and field
// order of Decode against a third party.
var saramaBatches = []struct {
	name    string
	encoded []byte
	records []Record
	err     error
}{
	{
		name: "empty batch",
		encoded: []byte{
			0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 49, 0, 0, 0, 0, 2,
			89, 95, 183, 221, // crc
			0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		},
	},
	{
		name: "control batch",
		encoded: []byte{
			0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 49, 0, 0, 0, 0, 2,
			81, 46, 67, 217, // crc
			0, 32, // attributes: control
			0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		},
	},
	{
		name: "uncompressed record",
		encoded: []byte{
			0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 70, 0, 0, 0, 0, 2,
			84, 121, 97, 253, // crc
			0, 0, // attributes
			0, 0, 0, 0, // lastOffsetDelta
			0, 0, 1, 88, 141, 205, 89, 56, // baseTimestamp 1479847795000
			0, 0, 0, 0, 0, 0, 0, 0, // maxTimestamp
			0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // producer id, epoch, sequence
			0, 0, 0, 1, // recordCount
			40, 0, 10, 0, 8, 1, 2, 3, 4, 6, 5, 6, 7, 2, 6, 8, 9, 10, 4, 11, 12,
		},
		records: []Record{{Timestamp: 1479847795005, Key: []byte{1, 2, 3, 4}, Value: []byte{5, 6, 7}, Headers: []Header{{Key: "\x08\x09\x0a", Value: []byte{11, 12}}}}},
	},
	{
		name: "gzip record",
		encoded: []byte{
			0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 94, 0, 0, 0, 0, 2,
			159, 236, 182, 189, // crc
			0, 1, // attributes: gzip
			0, 0, 0, 0,
			0, 0, 1, 88, 141, 205, 89, 56,
			0, 0, 0, 0, 0, 0, 0, 0,
			0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
			0, 0, 0, 1,
			31, 139, 8, 0, 0, 0, 0, 0, 0, 255, 210, 96, 224, 98, 224, 96, 100, 98, 102, 97, 99, 101,
			99, 103, 98, 227, 224, 228, 98, 225, 230, 1, 4, 0, 0, 255, 255, 173, 201, 88, 103, 21, 0, 0, 0,
		},
		records: []Record{{Timestamp: 1479847795005, Key: []byte{1, 2, 3, 4}, Value: []byte{5, 6, 7}, Headers: []Header{{Key: "\x08\x09\x0a", Value: []byte{11, 12}}}}},
	},
	{
		name: "snappy record",
		encoded: []byte{
			0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 72, 0, 0, 0, 0, 2,
			21, 0, 159, 97, // crc
			0, 2, // attributes: snappy
			0, 0, 0, 0,
			0, 0, 1, 88, 141, 205, 89, 56,
			0, 0, 0, 0, 0, 0, 0, 0,
			0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
			0, 0, 0, 1,
			21, 80, 40, 0, 10, 0, 8, 1, 2, 3, 4, 6, 5, 6, 7, 2, 6, 8, 9, 10, 4, 11, 12,
		},
		records: []Record{{Timestamp: 1479847795005, Key: []byte{1, 2, 3, 4}, Value: []byte{5, 6, 7}, Headers: []Header{{Key: "\x08\x09\x0a", Value: []byte{11, 12}}}}},
	},
}

func TestDecodeThirdPartyBatches(t *testing.T) {
	for _, tt := range saramaBatches {
		t.Run(tt.name, func(t *testing.T) {
			// Verify checks the CRC for every codec.
			info, err := Verify(tt.encoded)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if info.Length != len(tt.encoded) {
				t.Errorf("Length = %d, want %d", info.Length, len(tt.encoded))
			}
			b, n, err := Decode(tt.encoded)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("Decode error %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if n != len(tt.encoded) {
				t.Errorf("consumed %d, want %d", n, len(tt.encoded))
			}
			equalRecords(t, b.Records, tt.records, true)
			if got, want := b.IsControl(), tt.name == "control batch"; got != want {
				t.Errorf("IsControl = %t, want %t", got, want)
			}
		})
	}
}
