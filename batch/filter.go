package batch

import (
	"encoding/binary"
	"hash/crc32"
)

// Filter returns the batch at the start of b holding only the records for
// which keep returns true, for log compaction. keep sees the records in
// offset order (as [Decode] returns them). The result keeps the header of b
// (baseOffset, partitionLeaderEpoch, lastOffsetDelta, timestamps, producer
// fields, attributes) and each kept record's offset and timestamp deltas, so
// every kept record has its original offset and the offsets of dropped
// records become gaps. A compressed batch is rewritten uncompressed (the
// compression bits of the attributes are cleared).
//
// If keep returns true for every record, Filter returns b[:Length] itself
// (no copy); if it keeps none, it returns (nil, nil). Control batches are
// never filtered: they are returned whole without calling keep.
func Filter(b []byte, keep func(r *Record) bool) ([]byte, error) {
	bt, n, err := Decode(b)
	if err != nil {
		return nil, err
	}
	if bt.IsControl() {
		return b[:n], nil
	}
	kept := make([]int, 0, len(bt.Records))
	for i := range bt.Records {
		if keep(&bt.Records[i]) {
			kept = append(kept, i)
		}
	}
	switch {
	case len(kept) == 0:
		return nil, nil
	case len(kept) == len(bt.Records) && bt.Compression() == CompressionNone:
		return b[:n], nil
	}
	out := make([]byte, HeaderSize, n+len(kept)*binary.MaxVarintLen64)
	copy(out, b[:HeaderSize])
	for _, i := range kept {
		r := &bt.Records[i]
		out = appendRecord(out, r, r.Timestamp-bt.BaseTimestamp, r.Offset-bt.BaseOffset)
	}
	binary.BigEndian.PutUint32(out[posBatchLength:], uint32(len(out)-lengthPrefix))
	attrs := binary.BigEndian.Uint16(out[posAttributes:]) &^ compressionMask
	binary.BigEndian.PutUint16(out[posAttributes:], attrs)
	binary.BigEndian.PutUint32(out[posRecordCount:], uint32(len(kept)))
	binary.BigEndian.PutUint32(out[posCRC:], crc32.Checksum(out[crcStart:], castagnoli))
	return out, nil
}
