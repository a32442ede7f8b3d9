package batch

// UnknownLeaderEpoch is the partitionLeaderEpoch of a batch served to a
// reader: -1, "unknown" in Kafka. A stored batch carries its log's own
// bookkeeping in that field (log/doc.go, "Applied index"), which means
// nothing to a reader.
const UnknownLeaderEpoch = -1

// Span is what [SpanFrom] found at the start of stored batches.
type Span struct {
	// Len is the length of the leading whole batches it covers, a prefix
	// of the input.
	Len int
	// Records counts their records at or above the reader's offset, from
	// the batch headers alone: a batch's records minus, when it begins
	// below the offset, the offset slots below it. In a batch compaction
	// left gaps in, fewer records than that may lie below the offset, so
	// the count is a lower bound; it is exact for batches never compacted.
	Records int
	// Next is the offset that follows the last of them (its
	// [Info.NextOffset]), or the reader's offset if that is higher or
	// there are none.
	Next int64
}

// SpanFrom walks the headers of the whole batches at the start of b, as a
// log read returns them to a reader at offset (the first may begin below
// it), without looking inside their records or checking their CRCs. It
// stops after the batch that brings [Span.Records] to maxRecords (0 or
// less means no bound), and at the first bytes that are not a whole batch.
// Since the count is a lower bound, the batches it covers hold at least
// maxRecords records at or above offset when it stopped there: a reader
// that decodes them and keeps maxRecords records misses none it asked
// for.
func SpanFrom(b []byte, offset int64, maxRecords int) Span {
	s := Span{Next: offset}
	for s.Len < len(b) {
		info, err := Peek(b[s.Len:])
		if err != nil || info.Length > len(b)-s.Len {
			break
		}
		c := int64(info.RecordCount)
		if offset > info.BaseOffset {
			c -= min(c, offset-info.BaseOffset)
		}
		s.Records += int(c)
		s.Len += info.Length
		s.Next = max(s.Next, info.NextOffset())
		if maxRecords > 0 && s.Records >= maxRecords {
			break
		}
	}
	return s
}

// ServeLeaderEpochs sets the partitionLeaderEpoch of every whole batch at
// the start of b to [UnknownLeaderEpoch], in place, and stops at the first
// bytes that are not a whole batch. The field is outside the CRC, so the
// batches stay valid: everything else is served as stored.
func ServeLeaderEpochs(b []byte) {
	for rest := b; len(rest) > 0; {
		info, err := Peek(rest)
		if err != nil || info.Length > len(rest) {
			return
		}
		SetPartitionLeaderEpoch(rest, UnknownLeaderEpoch)
		rest = rest[info.Length:]
	}
}
