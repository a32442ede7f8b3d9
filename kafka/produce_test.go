package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
)

// follower is a backend that is not the leader, as every node but one is.
type follower struct{ backend.Kafka }

func (follower) IsLeader() bool { return false }

func (follower) LeadsPartition(string, int32) bool { return false }

// overloaded is a backend whose appends admission control refuses.
type overloaded struct{ backend.Kafka }

func (overloaded) Append(context.Context, backend.Append) ([]int64, error) {
	return nil, &backend.OverloadedError{Topic: "t", Group: "workers", Bound: "records", Backlog: 10, Adding: 1, Limit: 10, RetryAfter: 750 * time.Millisecond}
}

// withAttributes returns a copy of b with its attributes (and CRC) changed
// by set, and its producer id set to pid.
func withAttributes(b []byte, set int16, pid int64) []byte {
	c := append([]byte(nil), b...)
	attrs := int16(binary.BigEndian.Uint16(c[21:])) | set
	binary.BigEndian.PutUint16(c[21:], uint16(attrs))
	binary.BigEndian.PutUint64(c[43:], uint64(pid))
	binary.BigEndian.PutUint32(c[17:], crc32.Checksum(c[21:], crc32.MakeTable(crc32.Castagnoli)))
	return c
}

// TestProduceRefusals checks each refusal of a produce: the code, that
// the refused batch was not written, and that a valid batch of another
// partition in the same request was.
func TestProduceRefusals(t *testing.T) {
	tn := startNode(t)
	tn.createTopic("p", 2, map[string]string{"max.message.bytes": "1024"})
	tn.createTopic("compacted", 1, map[string]string{"cleanup.policy": "compact"})
	c := dial(t, tn.addr)
	good := records(t, "good")
	badCRC := append([]byte(nil), good...)
	badCRC[len(badCRC)-1] ^= 0xff
	big := records(t, string(make([]byte, 2000)))
	// A record's length past the batch's end, under a CRC that holds:
	// refused by the records' check, not the CRC's.
	badRecord := withAttributes(good, 0, -1)
	badRecord[batch.HeaderSize] = 0x7e
	binary.BigEndian.PutUint32(badRecord[17:], crc32.Checksum(badRecord[21:], crc32.MakeTable(crc32.Castagnoli)))

	cases := []struct {
		name  string
		topic string
		part  int32
		b     []byte
		acks  int16
		txn   bool
		code  int16
	}{
		{"unknown topic", "nope", 0, good, -1, false, errUnknownTopicOrPartition},
		{"unknown partition", "p", 7, good, -1, false, errUnknownTopicOrPartition},
		{"bad crc", "p", 0, badCRC, -1, false, errCorruptMessage},
		{"truncated", "p", 0, good[:40], -1, false, errCorruptMessage},
		{"record framing", "p", 0, badRecord, -1, false, errCorruptMessage},
		{"two batches", "p", 0, append(append([]byte(nil), good...), good...), -1, false, errInvalidRecord},
		{"too large", "p", 0, big, -1, false, errMessageTooLarge},
		{"producer id without an epoch or sequence", "p", 0, withAttributes(good, 0, 42), -1, false, errInvalidRecord},
		{"transactional batch", "p", 0, withAttributes(good, 0x10, -1), -1, false, errInvalidTxnState},
		{"control batch", "p", 0, withAttributes(good, 0x20, -1), -1, false, errInvalidRecord},
		{"log append time", "p", 0, withAttributes(good, 0x08, -1), -1, false, errInvalidTimestamp},
		{"snappy that is not snappy", "compacted", 0, withAttributes(good, 2, -1), -1, false, errCorruptMessage},
		{"codec 5", "p", 0, withAttributes(good, 5, -1), -1, false, errCorruptMessage},
		{"acks 2", "p", 0, good, 2, false, errInvalidRequiredAcks},
		{"transactional id", "p", 0, good, -1, true, errInvalidTxnState},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := tn.backend.Offsets("p", 1)
			req := produceReq(9, tc.acks, tc.topic, tc.part, tc.b)
			if tc.txn {
				req.TransactionID = kmsg.StringPtr("tx")
			}
			// A valid batch for p-1 in the same request.
			other := kmsg.NewProduceRequestTopic()
			other.Topic = "p"
			op := kmsg.NewProduceRequestTopicPartition()
			op.Partition, op.Records = 1, records(t, "other")
			other.Partitions = append(other.Partitions, op)
			if tc.topic != "p" {
				req.Topics = append(req.Topics, other)
			} else {
				req.Topics[0].Partitions = append(req.Topics[0].Partitions, op)
			}
			resp := c.do(req).(*kmsg.ProduceResponse)
			first := resp.Topics[0].Partitions[0]
			if first.ErrorCode != tc.code {
				t.Fatalf("code %s (%d), message %v; want %s", errorName(first.ErrorCode), first.ErrorCode, first.ErrorMessage, errorName(tc.code))
			}
			if first.ErrorMessage == nil && tc.code != errUnknownTopicOrPartition {
				t.Errorf("no error message")
			}
			var second kmsg.ProduceResponseTopicPartition
			if tc.topic != "p" {
				second = resp.Topics[1].Partitions[0]
			} else {
				second = resp.Topics[0].Partitions[1]
			}
			after, _ := tn.backend.Offsets("p", 1)
			requestWide := tc.acks == 2 || tc.txn
			switch {
			case requestWide && (second.ErrorCode != tc.code || after.End != before.End):
				t.Errorf("the other partition: code %d, end %d -> %d; want the request refused whole", second.ErrorCode, before.End, after.End)
			case !requestWide && (second.ErrorCode != 0 || after.End != before.End+1):
				t.Errorf("the other partition: code %d, end %d -> %d; want it appended", second.ErrorCode, before.End, after.End)
			}
		})
	}
	if off, _ := tn.backend.Offsets("p", 0); off.End != 0 {
		t.Errorf("p-0 holds %d records; every batch for it was refused", off.End)
	}
}

// TestProduceOnFollower: a node that does not lead answers
// NOT_LEADER_OR_FOLLOWER (clients refresh their metadata) and writes
// nothing.
func TestProduceOnFollower(t *testing.T) {
	tn := startNode(t, func(o *Options) { o.Backend = follower{o.Backend} })
	tn.createTopic("f", 1, nil)
	c := dial(t, tn.addr)
	if code, _ := produceCode(t, c.do(produceReq(7, -1, "f", 0, records(t, "x")))); code != errNotLeaderOrFollower {
		t.Fatalf("code %s; want NOT_LEADER_OR_FOLLOWER", errorName(code))
	}
	if off, _ := tn.backend.Offsets("f", 0); off.End != 0 {
		t.Fatalf("%d records written", off.End)
	}
}

// TestProduceOverloaded: admission control's refusal is NOT_ENOUGH_REPLICAS,
// which every client retries, with its retry hint as throttle_time_ms.
func TestProduceOverloaded(t *testing.T) {
	tn := startNode(t, func(o *Options) { o.Backend = overloaded{o.Backend} })
	tn.createTopic("o", 1, nil)
	resp := dial(t, tn.addr).do(produceReq(8, 1, "o", 0, records(t, "x"))).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != errNotEnoughReplicas || resp.ThrottleMillis != 750 {
		t.Fatalf("code %s, throttle %d ms; want NOT_ENOUGH_REPLICAS, 750", errorName(code), resp.ThrottleMillis)
	}
}

// TestProduceAcksZero: acks=0 is never answered, the next request on the
// connection is, and the records were appended first.
func TestProduceAcksZero(t *testing.T) {
	tn := startNode(t)
	tn.createTopic("z", 1, nil)
	c := dial(t, tn.addr)
	c.send(produceReq(7, 0, "z", 0, records(t, "a", "b")))
	c.send(produceReq(7, 0, "nope", 0, records(t, "lost"))) // fails silently
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(7)
	resp := c.recv(meta, c.send(meta)).(*kmsg.MetadataResponse) // fails unless this is the first answer
	if len(resp.Topics) != 1 {
		t.Fatalf("metadata: %+v", resp)
	}
	if off, _ := tn.backend.Offsets("z", 0); off.End != 2 {
		t.Fatalf("end %d after an acks=0 produce of 2 records, answered after it", off.End)
	}
}

// TestProducePipelinedInOrder sends many produce requests to one partition
// without waiting, as clients do: they are appended, and answered, in the
// order sent.
func TestProducePipelinedInOrder(t *testing.T) {
	tn := startNode(t)
	tn.createTopic("order", 1, nil)
	c := dial(t, tn.addr)
	const n = 40
	corrs := make([]int32, n)
	for i := range n {
		corrs[i] = c.send(produceReq(9, -1, "order", 0, records(t, fmt.Sprint(i))))
	}
	for i := range n {
		code, base := produceCode(t, c.recv(produceReq(9, -1, "order", 0, nil), corrs[i]))
		if code != 0 || base != int64(i) {
			t.Fatalf("request %d: code %d, base offset %d; want %d", i, code, base, i)
		}
	}
	p := fetchPart(t, c.do(fetchReq(12, "order", 0, 0, 0, 1, 1<<20)))
	got := batchValues(t, p.RecordBatches, 0)
	for i, v := range got {
		if v != fmt.Sprint(i) {
			t.Fatalf("offset %d holds %q", i, v)
		}
	}
	if len(got) != n {
		t.Fatalf("%d records", len(got))
	}
}

// TestProduceNullKeyCompacted: a compacted topic refuses a batch with a
// record without a key (a null key; an empty one is a key) with
// INVALID_RECORD, as Kafka does, and writes nothing of it; a topic that
// is not compacted takes it.
func TestProduceNullKeyCompacted(t *testing.T) {
	tn := startNode(t)
	tn.createTopic("compacted", 1, map[string]string{"cleanup.policy": "compact"})
	tn.createTopic("both", 1, map[string]string{"cleanup.policy": "compact,delete"})
	tn.createTopic("plain", 1, nil)
	c := dial(t, tn.addr)
	keyed := func(keys ...[]byte) []byte {
		recs := make([]batch.Record, len(keys))
		for i, k := range keys {
			recs[i] = batch.Record{Timestamp: time.Now().UnixMilli(), Key: k, Value: []byte("v")}
		}
		b, err := batch.Build(recs)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name, topic string
		batch       []byte
		code        int16
	}{
		{name: "null key, compacted", topic: "compacted", batch: keyed([]byte("k"), nil), code: errInvalidRecord},
		{name: "null key, compact and delete", topic: "both", batch: keyed(nil), code: errInvalidRecord},
		{name: "keys, compacted", topic: "compacted", batch: keyed([]byte("k"), []byte{})},
		{name: "null key, not compacted", topic: "plain", batch: keyed(nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := tn.backend.Offsets(tc.topic, 0)
			code, _ := produceCode(t, c.do(produceReq(9, -1, tc.topic, 0, tc.batch)))
			if code != tc.code {
				t.Fatalf("produce: %s, want %s", errorName(code), errorName(tc.code))
			}
			after, _ := tn.backend.Offsets(tc.topic, 0)
			if written := after.End - before.End; (written == 0) != (tc.code != errNone) {
				t.Fatalf("%d records written", written)
			}
		})
	}
}
