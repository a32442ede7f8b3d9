package batch

import (
	"fmt"
)

// Decode decodes the batch at the start of b and returns it with the number
// of bytes it occupies. It verifies the length, magic and CRC (as [Verify])
// and every record's structure; trailing bytes inside the batch are an error.
//
// Record offsets are BaseOffset + offsetDelta; offset deltas must increase
// strictly within [0, LastOffsetDelta] (a compacted batch may have gaps).
// Record timestamps are BaseTimestamp + timestampDelta, or MaxTimestamp for
// every record of a LogAppendTime batch, as in Kafka.
//
// For an uncompressed batch, the Key, Value and header Value slices of the
// records alias b (with their capacity clipped); modifying b changes them.
// Control batches are decoded like any other; see [Batch.IsControl].
func Decode(b []byte) (Batch, int, error) {
	info, err := Verify(b)
	if err != nil {
		return Batch{}, 0, err
	}
	return decodeVerified(b, info)
}

// DecodeVerified is [Decode] of a batch whose CRC the caller has just
// checked: info must be what [Verify] returned for b, and b must not have
// changed since. It checks the records' structure as Decode does, without
// computing the CRC again, for a caller that checks the header before it
// decodes the records.
func DecodeVerified(b []byte, info Info) (Batch, int, error) {
	if len(b) < info.Length || info.Length < HeaderSize {
		return Batch{}, 0, &TruncatedError{Need: info.Length, Have: len(b)}
	}
	return decodeVerified(b, info)
}

func decodeVerified(b []byte, info Info) (Batch, int, error) {
	var err error
	batch := Batch{
		BaseOffset:           info.BaseOffset,
		PartitionLeaderEpoch: info.PartitionLeaderEpoch,
		Attributes:           info.Attributes,
		LastOffsetDelta:      info.LastOffsetDelta,
		BaseTimestamp:        info.BaseTimestamp,
		MaxTimestamp:         info.MaxTimestamp,
		ProducerID:           info.ProducerID,
		ProducerEpoch:        info.ProducerEpoch,
		BaseSequence:         info.BaseSequence,
	}
	data := b[HeaderSize:info.Length]
	compressed := false
	switch c := info.Compression(); c {
	case CompressionNone:
	case CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd:
		data, err = decompress(c, data, MaxUncompressedSize)
		if err != nil {
			return Batch{}, 0, &CorruptError{BaseOffset: info.BaseOffset, Pos: HeaderSize, Reason: err.Error()}
		}
		compressed = true
	default:
		return Batch{}, 0, &CorruptError{BaseOffset: info.BaseOffset, Pos: posAttributes, Reason: fmt.Sprintf("unknown compression %s", c)}
	}
	batch.Records, err = decodeRecords(&batch, data, int(info.RecordCount), compressed)
	if err != nil {
		return Batch{}, 0, err
	}
	return batch, info.Length, nil
}

// decodeRecords decodes count records that must fill data exactly.
func decodeRecords(batch *Batch, data []byte, count int, compressed bool) ([]Record, error) {
	corrupt := func(pos int, reason string) error {
		if !compressed {
			pos += HeaderSize
		}
		return &CorruptError{BaseOffset: batch.BaseOffset, Pos: pos, Compressed: compressed, Reason: reason}
	}
	if count == 0 {
		if len(data) != 0 {
			return nil, corrupt(0, fmt.Sprintf("%d bytes after the last record", len(data)))
		}
		return nil, nil
	}
	// The count is untrusted: size the slice by what data can hold.
	if count > len(data)/minRecordSize {
		return nil, corrupt(0, fmt.Sprintf("record count %d cannot fit in %d bytes", count, len(data)))
	}
	records := make([]Record, count)
	// Headers of all records share one backing array, grown by append.
	var headers []Header
	r := reader{b: data}
	prevDelta := int32(-1)
	logAppendTime := batch.LogAppendTime()
	for i := range records {
		start := r.pos
		length := r.varint()
		if r.err != "" {
			return nil, corrupt(start, fmt.Sprintf("record %d length: %s", i, r.err))
		}
		if length < 0 || int(length) > len(data)-r.pos {
			return nil, corrupt(start, fmt.Sprintf("record %d length %d exceeds the %d bytes left", i, length, len(data)-r.pos))
		}
		// Parse within the record's own bytes so a record cannot read into
		// its successor.
		rr := reader{b: data[:r.pos+int(length)], pos: r.pos}
		rec := &records[i]
		rr.int8() // record attributes: unused by the format
		tsDelta := rr.varlong()
		offsetDelta := rr.varint()
		rec.Key = rr.bytes("key", true)
		rec.Value = rr.bytes("value", true)
		headerCount := rr.varint()
		if rr.err == "" {
			switch {
			case headerCount < 0:
				rr.fail(fmt.Sprintf("negative header count %d", headerCount))
			case int(headerCount) > (len(rr.b)-rr.pos)/minHeaderSize:
				rr.fail(fmt.Sprintf("header count %d cannot fit in %d bytes", headerCount, len(rr.b)-rr.pos))
			}
		}
		if rr.err == "" && headerCount > 0 {
			first := len(headers)
			for range headerCount {
				key := rr.bytes("header key", false)
				value := rr.bytes("header value", true)
				if rr.err != "" {
					break
				}
				headers = append(headers, Header{Key: string(key), Value: value})
			}
			rec.Headers = headers[first:len(headers):len(headers)]
		}
		if rr.err == "" && rr.pos != len(rr.b) {
			rr.fail(fmt.Sprintf("%d bytes left over", len(rr.b)-rr.pos))
		}
		if rr.err == "" && (offsetDelta <= prevDelta || offsetDelta > batch.LastOffsetDelta) {
			rr.fail(fmt.Sprintf("offset delta %d not in (%d, %d]", offsetDelta, prevDelta, batch.LastOffsetDelta))
		}
		if rr.err != "" {
			return nil, corrupt(start, fmt.Sprintf("record %d: %s", i, rr.err))
		}
		prevDelta = offsetDelta
		rec.Offset = batch.BaseOffset + int64(offsetDelta)
		rec.Timestamp = batch.BaseTimestamp + tsDelta
		if logAppendTime {
			rec.Timestamp = batch.MaxTimestamp
		}
		r.pos = rr.pos
	}
	if r.pos != len(data) {
		return nil, corrupt(r.pos, fmt.Sprintf("%d bytes after the last record", len(data)-r.pos))
	}
	return records, nil
}

// DecodeAll decodes the contiguous batches that make up b. Any error,
// including a partial batch at the end, fails the whole call; its message
// names the byte position of the failing batch. Records alias b as in
// [Decode].
func DecodeAll(b []byte) ([]Batch, error) {
	var batches []Batch
	for pos := 0; pos < len(b); {
		batch, n, err := Decode(b[pos:])
		if err != nil {
			return nil, fmt.Errorf("batch at byte %d: %w", pos, err)
		}
		batches = append(batches, batch)
		pos += n
	}
	return batches, nil
}

// Records returns the records with offset >= fromOffset from the contiguous
// batches in b, in order, at most max of them (max <= 0 means all). Batches
// that end before fromOffset are skipped by their header alone, without a CRC
// check; every batch that contributes records is fully verified. It stops
// reading once it has max records. Records alias b as in [Decode].
func Records(b []byte, fromOffset int64, max int) ([]Record, error) {
	// Sized by the batch headers' count of the records wanted (a lower
	// bound, SpanFrom), so that appending them rarely grows it; the
	// count is untrusted, so no more than b could hold uncompressed.
	var out []Record
	if n := min(SpanFrom(b, fromOffset, max).Records, len(b)/minRecordSize); n > 0 {
		if max > 0 {
			n = min(n, max)
		}
		out = make([]Record, 0, n)
	}
	for pos := 0; pos < len(b); {
		info, err := Peek(b[pos:])
		if err != nil {
			return nil, fmt.Errorf("batch at byte %d: %w", pos, err)
		}
		if info.LastOffset() < fromOffset {
			if len(b)-pos < info.Length {
				return nil, fmt.Errorf("batch at byte %d: %w", pos, &TruncatedError{Need: info.Length, Have: len(b) - pos})
			}
			pos += info.Length
			continue
		}
		batch, n, err := Decode(b[pos:])
		if err != nil {
			return nil, fmt.Errorf("batch at byte %d: %w", pos, err)
		}
		for _, rec := range batch.Records {
			if rec.Offset < fromOffset {
				continue
			}
			out = append(out, rec)
			if max > 0 && len(out) == max {
				return out, nil
			}
		}
		pos += n
	}
	return out, nil
}
