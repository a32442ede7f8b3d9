package kafka

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/batch"
)

// TestFetchServesStoredBatches: a fetch from inside a batch gets that whole
// batch, byte for byte as produced but for the leader epoch (-1, outside
// the CRC, which still holds) and the base offset the log assigned.
func TestFetchServesStoredBatches(t *testing.T) {
	tn := startNode(t)
	tn.createTopic("f", 1, nil)
	c := dial(t, tn.addr)
	first := records(t, "a", "b")
	second := records(t, "c", "d", "e", "f", "g")
	for _, b := range [][]byte{first, second} {
		if code, _ := produceCode(t, c.do(produceReq(9, -1, "f", 0, b))); code != 0 {
			t.Fatalf("produce: %s", errorName(code))
		}
	}
	p := fetchPart(t, c.do(fetchReq(12, "f", 0, 4, 0, 1, 1<<20)))
	if p.ErrorCode != 0 || p.HighWatermark != 7 || p.LastStableOffset != 7 || p.LogStartOffset != 0 {
		t.Fatalf("code %d, high watermark %d, last stable %d, log start %d", p.ErrorCode, p.HighWatermark, p.LastStableOffset, p.LogStartOffset)
	}
	if len(p.RecordBatches) != len(second) {
		t.Fatalf("%d bytes served; want the second batch, %d bytes", len(p.RecordBatches), len(second))
	}
	info, err := batch.Verify(p.RecordBatches)
	if err != nil {
		t.Fatal(err)
	}
	if info.BaseOffset != 2 || info.PartitionLeaderEpoch != -1 {
		t.Errorf("base offset %d, leader epoch %d; want 2, -1", info.BaseOffset, info.PartitionLeaderEpoch)
	}
	if string(p.RecordBatches[batch.HeaderSize-4:]) != string(second[batch.HeaderSize-4:]) || string(p.RecordBatches[16:]) != string(second[16:]) {
		t.Error("the served batch differs from the produced one beyond its base offset and leader epoch")
	}
	if got := batchValues(t, p.RecordBatches, 4); strings.Join(got, "") != "efg" {
		t.Errorf("records from offset 4: %q", got)
	}
}

// TestFetchLimits: however small max_bytes, a fetch gets one whole batch
// (KIP-74); the response's max_bytes then leaves later partitions empty,
// with their bounds.
func TestFetchLimits(t *testing.T) {
	tn := startNode(t)
	tn.createTopic("l", 2, nil)
	c := dial(t, tn.addr)
	big := strings.Repeat("x", 1000)
	for p := range int32(2) {
		if code, _ := produceCode(t, c.do(produceReq(9, -1, "l", p, records(t, big)))); code != 0 {
			t.Fatal(errorName(code))
		}
	}
	req := fetchReq(11, "l", 0, 0, 0, 1, 10)
	req.Topics[0].Partitions[0].PartitionMaxBytes = 10
	p1 := kmsg.NewFetchRequestTopicPartition()
	p1.Partition, p1.PartitionMaxBytes = 1, 1<<20
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, p1)
	resp := c.do(req).(*kmsg.FetchResponse)
	ps := resp.Topics[0].Partitions
	if got := batchValues(t, ps[0].RecordBatches, 0); len(got) != 1 || got[0] != big {
		t.Errorf("partition 0: %d records; want the one batch despite max bytes 10", len(got))
	}
	if len(ps[1].RecordBatches) != 0 || ps[1].HighWatermark != 1 || ps[1].ErrorCode != 0 {
		t.Errorf("partition 1: %d bytes, high watermark %d, code %d; want none, 1, 0", len(ps[1].RecordBatches), ps[1].HighWatermark, ps[1].ErrorCode)
	}
}

// TestFetchOutOfRange: below the log start or past the end is
// OFFSET_OUT_OF_RANGE with the bounds; at the end is an empty answer.
func TestFetchOutOfRange(t *testing.T) {
	tn := startNode(t)
	tn.createTopic("r", 1, nil)
	c := dial(t, tn.addr)
	c.do(produceReq(9, -1, "r", 0, records(t, "a", "b", "c")))
	for _, off := range []int64{-1, 4, 100} {
		p := fetchPart(t, c.do(fetchReq(12, "r", 0, off, 0, 1, 1<<20)))
		if p.ErrorCode != errOffsetOutOfRange || p.HighWatermark != 3 || p.LogStartOffset != 0 {
			t.Errorf("offset %d: code %s, high watermark %d, log start %d", off, errorName(p.ErrorCode), p.HighWatermark, p.LogStartOffset)
		}
	}
	if p := fetchPart(t, c.do(fetchReq(12, "r", 0, 3, 0, 1, 1<<20))); p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 3 {
		t.Errorf("at the end: code %d, %d bytes, high watermark %d", p.ErrorCode, len(p.RecordBatches), p.HighWatermark)
	}
	if p := fetchPart(t, c.do(fetchReq(12, "nope", 0, 0, 0, 1, 1<<20))); p.ErrorCode != errUnknownTopicOrPartition {
		t.Errorf("unknown topic: %s", errorName(p.ErrorCode))
	}
}

// TestFetchLongPoll: a fetch at the end waits for the next append and
// answers with it; one that nothing wakes answers empty at max_wait_ms.
func TestFetchLongPoll(t *testing.T) {
	tn := startNode(t)
	tn.createTopic("w", 1, nil)
	c := dial(t, tn.addr)
	// Nothing comes: an empty answer (after about 100 ms).
	if p := fetchPart(t, c.do(fetchReq(12, "w", 0, 0, 100, 1, 1<<20))); p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("idle long poll: code %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	// A produce on another connection wakes a 20 s poll.
	req := fetchReq(12, "w", 0, 0, 20_000, 1, 1<<20)
	corr := c.send(req)
	time.Sleep(50 * time.Millisecond) // let the fetch start waiting (it reads again when woken either way)
	if code, _ := produceCode(t, dial(t, tn.addr).do(produceReq(9, -1, "w", 0, records(t, "wake")))); code != 0 {
		t.Fatal(errorName(code))
	}
	start := time.Now()
	p := fetchPart(t, c.recv(req, corr))
	if got := batchValues(t, p.RecordBatches, 0); len(got) != 1 || got[0] != "wake" {
		t.Fatalf("woken fetch: %q", got)
	}
	t.Logf("woken fetch answered %v after the produce was acknowledged (under shared load)", time.Since(start))
}

// TestFetchSessionsRefused: a full fetch with session id 0 is answered
// with session id 0, so the client keeps sending full fetches; a request
// naming a session is told it does not exist.
func TestFetchSessionsRefused(t *testing.T) {
	tn := startNode(t)
	tn.createTopic("s", 1, nil)
	c := dial(t, tn.addr)
	req := fetchReq(12, "s", 0, 0, 0, 1, 1<<20)
	req.SessionID, req.SessionEpoch = 0, 0 // asks for a new session
	if resp := c.do(req).(*kmsg.FetchResponse); resp.ErrorCode != 0 || resp.SessionID != 0 {
		t.Errorf("new session: code %d, session id %d; want 0, 0", resp.ErrorCode, resp.SessionID)
	}
	req.SessionID, req.SessionEpoch = 77, 1
	if resp := c.do(req).(*kmsg.FetchResponse); resp.ErrorCode != errFetchSessionIDNotFound {
		t.Errorf("unknown session: code %s", errorName(resp.ErrorCode))
	}
}

// TestReadsOnFollower: a follower answers fetches and offset lists with
// NOT_LEADER_OR_FOLLOWER, and administration with NOT_CONTROLLER.
func TestReadsOnFollower(t *testing.T) {
	tn := startNode(t, func(o *Options) { o.Backend = follower{o.Backend} })
	tn.createTopic("f", 1, nil)
	c := dial(t, tn.addr)
	if p := fetchPart(t, c.do(fetchReq(12, "f", 0, 0, 1000, 1, 1<<20))); p.ErrorCode != errNotLeaderOrFollower {
		t.Errorf("fetch: %s", errorName(p.ErrorCode))
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.SetVersion(7)
	lo.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "f", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -1}}}}
	if code := c.do(lo).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode; code != errNotLeaderOrFollower {
		t.Errorf("list offsets: %s", errorName(code))
	}
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.SetVersion(7)
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "g", NumPartitions: 1, ReplicationFactor: 1}}
	if code := c.do(ct).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != errNotController {
		t.Errorf("create topics: %s", errorName(code))
	}
	meta := c.do(kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
	if len(meta.Topics) != 1 || meta.Topics[0].ErrorCode != 0 {
		t.Errorf("metadata on a follower: %+v", meta.Topics)
	}
}

// TestFetchLongPollEndsWithItsClient: a client that goes away during a
// long poll does not hold its connection's goroutines until max_wait_ms.
func TestFetchLongPollEndsWithItsClient(t *testing.T) {
	tn := startNode(t)
	tn.createTopic("gone", 1, nil)
	c := dial(t, tn.addr)
	c.send(fetchReq(12, "gone", 0, 0, 60_000, 1, 1<<20))
	time.Sleep(50 * time.Millisecond) // the poll starts waiting
	c.conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	for value(t, tn.srv.metrics.connsOpen) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the connection is still served 10s after its client left a 60s long poll")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
