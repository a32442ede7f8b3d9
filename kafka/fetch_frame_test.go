package kafka

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchFrameMatchesKmsg: for every Fetch version served, the pieces
// fetchFrame writes are, end to end, the bytes kmsg encodes for the same
// response (appendResponse): partitions with errors, no batches, small
// (inlined) and large batches, aborted transactions, and after other bytes
// in the buffer. A response with a field it does not encode is left to
// kmsg.
func TestFetchFrameMatchesKmsg(t *testing.T) {
	big := bytes.Repeat([]byte("b"), 3*inlineBatchBytes)
	small := []byte("small batch")
	for v := int16(4); v <= 12; v++ {
		resp := kmsg.NewPtrFetchResponse()
		resp.SetVersion(v)
		resp.ThrottleMillis, resp.ErrorCode, resp.SessionID = 7, 0, 0
		for ti, name := range []string{"orders", "t"} {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = name
			for pi, b := range [][]byte{big, nil, {}, small, big[:inlineBatchBytes]} {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition = int32(pi)
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = int64(100+pi), int64(99+pi), int64(ti)
				rp.RecordBatches = b
				switch pi {
				case 1:
					rp.ErrorCode = errOffsetOutOfRange
				case 2:
					rp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 5, FirstOffset: 6}}
				default:
					rp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		h := requestHeader{key: keyFetch, version: v, correlationID: 42}
		want := appendResponse(nil, h, resp)
		for _, prefix := range [][]byte{nil, []byte("earlier bytes")} {
			t.Run(fmt.Sprintf("v%d/prefix %d", v, len(prefix)), func(t *testing.T) {
				bufs, _, ok := fetchFrame(bytes.Clone(prefix), h, resp)
				if !ok {
					t.Fatal("not encoded")
				}
				var got []byte
				pieces := len(bufs)
				for _, b := range bufs {
					got = append(got, b...)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%d bytes in %d pieces differ from kmsg's %d", len(got), pieces, len(want))
				}
				// Each topic's two large batches are pieces of their own,
				// each after the bytes before it; the tags of a flexible
				// version follow the last.
				want := 2 * 2 * 2
				if v >= 12 {
					want++
				}
				if pieces != want {
					t.Errorf("%d pieces, want %d", pieces, want)
				}
			})
		}
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(12)
	rt := kmsg.NewFetchResponseTopic()
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.CurrentLeader.LeaderID = 1
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	if _, _, ok := fetchFrame(nil, requestHeader{key: keyFetch, version: 12}, resp); ok {
		t.Error("a response with a current leader was encoded: fetchFrame does not write tagged fields")
	}
}
