package log

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Kafka RecordBatch v2 header layout (big-endian).
const (
	headerSize      = 61
	lengthOverhead  = 12 // baseOffset + batchLength precede the counted bytes
	offBaseOffset   = 0
	offBatchLength  = 8
	offLeaderEpoch  = 12
	offMagic        = 16
	offCRC          = 17
	offCRCStart     = 21 // the CRC covers bytes 21..end
	offLastDelta    = 23
	offMaxTimestamp = 35
	offRecordCount  = 57
	batchMagic      = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// header is the part of a batch header the log uses.
type header struct {
	baseOffset int64
	size       int64  // total bytes of the batch: 12 + batchLength
	epoch      uint32 // partitionLeaderEpoch; the log stores the applied-index delta here
	crc        uint32
	lastDelta  int32
	maxTs      int64
	count      int32
}

// nextOffset is the offset after the batch's last record.
func (h header) nextOffset() int64 { return h.baseOffset + int64(h.lastDelta) + 1 }

func parseHeader(b []byte) header {
	_ = b[headerSize-1]
	return header{
		baseOffset: int64(binary.BigEndian.Uint64(b[offBaseOffset:])),
		size:       lengthOverhead + int64(int32(binary.BigEndian.Uint32(b[offBatchLength:]))),
		epoch:      binary.BigEndian.Uint32(b[offLeaderEpoch:]),
		crc:        binary.BigEndian.Uint32(b[offCRC:]),
		lastDelta:  int32(binary.BigEndian.Uint32(b[offLastDelta:])),
		maxTs:      int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])),
		count:      int32(binary.BigEndian.Uint32(b[offRecordCount:])),
	}
}

// check validates the framing fields of h (not the CRC nor the baseOffset),
// given b[offMagic].
// It returns a reason, or "" when the header is well formed.
func (h header) check(magic byte) string {
	switch {
	case magic != batchMagic:
		return "magic is not 2"
	case h.size < headerSize:
		return "batchLength shorter than the header"
	case h.lastDelta < 0:
		return "negative lastOffsetDelta"
	case int64(h.count) != int64(h.lastDelta)+1:
		return "recordCount != lastOffsetDelta+1"
	}
	return ""
}

// checkStored is check for a batch read from a segment: in a compacted
// segment a batch may hold fewer records than offsets, even none (see
// compact.go), and the applied index may only be checked in order.
func (h header) checkStored(magic byte, compacted bool) string {
	if !compacted {
		return h.check(magic)
	}
	switch {
	case magic != batchMagic:
		return "magic is not 2"
	case h.size < headerSize:
		return "batchLength shorter than the header"
	case h.lastDelta < 0:
		return "negative lastOffsetDelta"
	case h.count < 0 || int64(h.count) > int64(h.lastDelta)+1:
		return "recordCount not in [0, lastOffsetDelta+1]"
	}
	return ""
}

// batchCRC computes the CRC-32C of a whole batch's checked bytes.
func batchCRC(b []byte) uint32 { return crc32.Checksum(b[offCRCStart:], castagnoli) }

// validateBatch checks a batch handed to Append.
func validateBatch(b []byte, maxBytes int) (header, error) {
	if len(b) < headerSize {
		return header{}, invalid("%d bytes is shorter than the %d-byte header", len(b), headerSize)
	}
	if len(b) > maxBytes {
		return header{}, fmt.Errorf("%w: %d bytes > MaxBatchBytes %d", ErrBatchTooLarge, len(b), maxBytes)
	}
	h := parseHeader(b)
	if h.size != int64(len(b)) {
		return header{}, invalid("batchLength says %d bytes, got %d", h.size, len(b))
	}
	if r := h.check(b[offMagic]); r != "" {
		return header{}, invalid("%s", r)
	}
	if got := batchCRC(b); got != h.crc {
		return header{}, invalid("CRC mismatch: header %08x, computed %08x", h.crc, got)
	}
	return h, nil
}
