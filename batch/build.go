package batch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
)

// Build encodes records as one uncompressed v2 batch. See [AppendBuild].
func Build(records []Record) ([]byte, error) {
	return AppendBuild(nil, records)
}

// AppendBuild appends to dst one uncompressed v2 batch holding records, and
// returns the extended slice. It grows dst at most once.
//
// The batch has baseOffset 0, partitionLeaderEpoch 0, CreateTime timestamps,
// producerId -1, producerEpoch -1 and baseSequence -1. Record i gets
// offsetDelta i (Record.Offset is ignored). As in Kafka, baseTimestamp is the
// first record's timestamp and maxTimestamp the largest; timestamp deltas may
// be negative.
//
// It returns [ErrNoRecords] for an empty list and [ErrTooLarge] when a length
// does not fit the format; dst is then returned unchanged.
func AppendBuild(dst []byte, records []Record) ([]byte, error) {
	if len(records) == 0 {
		return dst, ErrNoRecords
	}
	if int64(len(records))-1 > math.MaxInt32 {
		return dst, fmt.Errorf("%w: %d records", ErrTooLarge, len(records))
	}
	baseTS := records[0].Timestamp
	maxTS := baseTS
	size := HeaderSize
	for i := range records {
		r := &records[i]
		maxTS = max(maxTS, r.Timestamp)
		body, err := recordBodySize(r, r.Timestamp-baseTS, int64(i))
		if err != nil {
			return dst, fmt.Errorf("record %d: %w", i, err)
		}
		size += varintLen(int64(body)) + body
		if size > math.MaxInt32 {
			return dst, fmt.Errorf("%w: batch exceeds %d bytes", ErrTooLarge, math.MaxInt32)
		}
	}

	start := len(dst)
	dst = slices.Grow(dst, size)
	dst = dst[:start+HeaderSize]
	h := dst[start:]
	binary.BigEndian.PutUint64(h[posBaseOffset:], 0)
	binary.BigEndian.PutUint32(h[posBatchLength:], uint32(size-lengthPrefix))
	binary.BigEndian.PutUint32(h[posLeaderEpoch:], 0)
	h[posMagic] = Magic
	binary.BigEndian.PutUint16(h[posAttributes:], 0)
	binary.BigEndian.PutUint32(h[posLastOffsetDelta:], uint32(len(records)-1))
	binary.BigEndian.PutUint64(h[posBaseTimestamp:], uint64(baseTS))
	binary.BigEndian.PutUint64(h[posMaxTimestamp:], uint64(maxTS))
	binary.BigEndian.PutUint64(h[posProducerID:], math.MaxUint64)    // -1
	binary.BigEndian.PutUint16(h[posProducerEpoch:], math.MaxUint16) // -1
	binary.BigEndian.PutUint32(h[posBaseSequence:], math.MaxUint32)  // -1
	binary.BigEndian.PutUint32(h[posRecordCount:], uint32(len(records)))

	for i := range records {
		dst = appendRecord(dst, &records[i], records[i].Timestamp-baseTS, int64(i))
	}
	binary.BigEndian.PutUint32(dst[start+posCRC:], crc32.Checksum(dst[start+crcStart:], castagnoli))
	return dst, nil
}

// RecordSize returns the encoded size of r, including its length prefix, as
// the only record of a batch (offsetDelta 0, timestampDelta 0): exactly, the
// size of Build([]Record{r}) is HeaderSize + RecordSize(r). In a larger
// batch the deltas can add up to 14 bytes. Use it to enforce a maximum record
// size.
func RecordSize(r Record) int {
	body := recordBodyLen(&r, 0, 0)
	return varintLen(int64(body)) + body
}

// recordBodySize is recordBodyLen with the format's limits checked.
func recordBodySize(r *Record, tsDelta, offsetDelta int64) (int, error) {
	if len(r.Key) > math.MaxInt32 || len(r.Value) > math.MaxInt32 || len(r.Headers) > math.MaxInt32 {
		return 0, ErrTooLarge
	}
	for i := range r.Headers {
		if len(r.Headers[i].Key) > math.MaxInt32 || len(r.Headers[i].Value) > math.MaxInt32 {
			return 0, ErrTooLarge
		}
	}
	n := recordBodyLen(r, tsDelta, offsetDelta)
	if n > math.MaxInt32 {
		return 0, ErrTooLarge
	}
	return n, nil
}

// recordBodyLen is the encoded size of a record after its length prefix.
func recordBodyLen(r *Record, tsDelta, offsetDelta int64) int {
	n := 1 + varintLen(tsDelta) + varintLen(offsetDelta) +
		nullableLen(r.Key) + nullableLen(r.Value) + varintLen(int64(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		n += varintLen(int64(len(h.Key))) + len(h.Key) + nullableLen(h.Value)
	}
	return n
}

func nullableLen(b []byte) int {
	if b == nil {
		return 1
	}
	return varintLen(int64(len(b))) + len(b)
}

// appendRecord encodes one record; dst has room for it.
func appendRecord(dst []byte, r *Record, tsDelta, offsetDelta int64) []byte {
	dst = binary.AppendVarint(dst, int64(recordBodyLen(r, tsDelta, offsetDelta)))
	dst = append(dst, 0) // record attributes: unused
	dst = binary.AppendVarint(dst, tsDelta)
	dst = binary.AppendVarint(dst, offsetDelta)
	dst = appendNullable(dst, r.Key)
	dst = appendNullable(dst, r.Value)
	dst = binary.AppendVarint(dst, int64(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		dst = binary.AppendVarint(dst, int64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendNullable(dst, h.Value)
	}
	return dst
}

func appendNullable(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}
