package kafka

import (
	"encoding/binary"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A fetch response is mostly record batches, which the backend's read
// copied out of the log (the page cache) into a buffer this front end
// owns. Encoding the response with kmsg would copy them a second time,
// into the response's buffer; fetchFrame instead encodes everything
// around them, as kmsg would, and leaves each partition's batches where
// they are, so the frame goes out as pieces (net.Buffers: one writev on a
// plain TCP connection) and the batch bytes are copied once. The test
// (fetch_frame_test.go) compares its bytes with kmsg's for every version
// served.

// inlineBatchBytes is the size below which a partition's batches are
// copied into the encoded bytes rather than written as a piece of their
// own: copying a few KiB costs less than a piece more to write.
const inlineBatchBytes = 4 << 10

// fetchFrame appends resp's frame (size, correlation id, header, body) to
// dst and returns the pieces to write in order, the grown dst they point
// into, and true; false when resp has what it does not encode (a version
// not served, tagged fields, brokers, a diverging epoch, a current leader
// or a snapshot id: none of which this front end sets), to be encoded
// whole by kmsg (appendResponse) instead.
func fetchFrame(dst []byte, h requestHeader, resp *kmsg.FetchResponse) (net.Buffers, []byte, bool) {
	v := resp.Version
	if v < 4 || v > 12 || !plainFetchResponse(resp) {
		return nil, dst, false
	}
	flexible := v >= 12
	// pieces are spans of dst (batch == nil) or stored batches.
	type piece struct {
		from, to int
		batch    []byte
	}
	var pieces []piece
	mark := 0
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.correlationID))
	if flexible {
		dst = append(dst, 0) // no header tags
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(resp.ThrottleMillis))
	if v >= 7 {
		dst = binary.BigEndian.AppendUint16(dst, uint16(resp.ErrorCode))
		dst = binary.BigEndian.AppendUint32(dst, uint32(resp.SessionID))
	}
	dst = appendLen(dst, len(resp.Topics), flexible)
	size := 0 // the stored bytes written as pieces
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if flexible {
			dst = binary.AppendUvarint(dst, uint64(len(t.Topic))+1)
		} else {
			dst = binary.BigEndian.AppendUint16(dst, uint16(len(t.Topic)))
		}
		dst = append(dst, t.Topic...)
		dst = appendLen(dst, len(t.Partitions), flexible)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			dst = binary.BigEndian.AppendUint32(dst, uint32(p.Partition))
			dst = binary.BigEndian.AppendUint16(dst, uint16(p.ErrorCode))
			dst = binary.BigEndian.AppendUint64(dst, uint64(p.HighWatermark))
			dst = binary.BigEndian.AppendUint64(dst, uint64(p.LastStableOffset))
			if v >= 5 {
				dst = binary.BigEndian.AppendUint64(dst, uint64(p.LogStartOffset))
			}
			dst = appendNullableLen(dst, len(p.AbortedTransactions), p.AbortedTransactions == nil, flexible)
			for _, a := range p.AbortedTransactions {
				dst = binary.BigEndian.AppendUint64(dst, uint64(a.ProducerID))
				dst = binary.BigEndian.AppendUint64(dst, uint64(a.FirstOffset))
				if flexible {
					dst = append(dst, 0)
				}
			}
			if v >= 11 {
				dst = binary.BigEndian.AppendUint32(dst, uint32(p.PreferredReadReplica))
			}
			b := p.RecordBatches
			dst = appendNullableLen(dst, len(b), b == nil, flexible)
			if len(b) < inlineBatchBytes {
				dst = append(dst, b...)
			} else {
				pieces = append(pieces, piece{from: mark, to: len(dst)}, piece{batch: b})
				mark = len(dst)
				size += len(b)
			}
			if flexible {
				dst = append(dst, 0) // no partition tags
			}
		}
		if flexible {
			dst = append(dst, 0) // no topic tags
		}
	}
	if flexible {
		dst = append(dst, 0) // no response tags
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4+size))
	pieces = append(pieces, piece{from: mark, to: len(dst)})
	bufs := make(net.Buffers, 0, len(pieces))
	for i, pc := range pieces {
		switch {
		case pc.batch != nil:
			bufs = append(bufs, pc.batch)
		case i == 0:
			bufs = append(bufs, dst[:pc.to]) // from the frame's start
		case pc.to > pc.from:
			bufs = append(bufs, dst[pc.from:pc.to])
		}
	}
	if start > 0 {
		bufs[0] = bufs[0][start:]
	}
	return bufs, dst, true
}

// plainFetchResponse reports whether resp sets only what fetchFrame
// encodes: no tagged fields, brokers, diverging epochs, current leaders
// or snapshot ids.
func plainFetchResponse(resp *kmsg.FetchResponse) bool {
	if resp.UnknownTags.Len() > 0 || len(resp.Brokers) > 0 {
		return false
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.UnknownTags.Len() > 0 {
			return false
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.UnknownTags.Len() > 0 ||
				p.DivergingEpoch.Epoch != -1 || p.DivergingEpoch.EndOffset != -1 || p.DivergingEpoch.UnknownTags.Len() > 0 ||
				p.CurrentLeader.LeaderID != -1 || p.CurrentLeader.LeaderEpoch != -1 || p.CurrentLeader.UnknownTags.Len() > 0 ||
				p.SnapshotID.EndOffset != -1 || p.SnapshotID.Epoch != -1 || p.SnapshotID.UnknownTags.Len() > 0 {
				return false
			}
			for _, a := range p.AbortedTransactions {
				if a.UnknownTags.Len() > 0 {
					return false
				}
			}
		}
	}
	return true
}

// appendLen appends an array's count or bytes' length as Kafka encodes
// it: an int32, or in a flexible version a uvarint of n+1.
func appendLen(dst []byte, n int, flexible bool) []byte {
	if flexible {
		return binary.AppendUvarint(dst, uint64(n)+1)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}

// appendNullableLen is appendLen for a nullable array or bytes: -1, or
// in a flexible version 0, for null.
func appendNullableLen(dst []byte, n int, null, flexible bool) []byte {
	switch {
	case null && flexible:
		return append(dst, 0)
	case null:
		return binary.BigEndian.AppendUint32(dst, 0xffffffff)
	}
	return appendLen(dst, n, flexible)
}
