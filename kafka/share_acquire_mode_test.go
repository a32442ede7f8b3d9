package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/batch"
)

// TestShareFetchRecordLimit: a ShareFetch never hands out more than
// MaxRecords records, over all its partitions, in either ShareAcquireMode
// (KIP-1206: 1 is record-limit mode, which asks exactly that; 0,
// batch-optimized, lets a broker exceed it to keep batches whole, which
// logd does not need, as it builds the answer's batches from the records
// it claimed), and the batches it sends hold exactly the acquired
// records.
func TestShareFetchRecordLimit(t *testing.T) {
	tn := startNode(t, withShare(time.Minute, time.Minute, 10))
	tn.createTopic("lim", 2, nil)
	c := dial(t, tn.addr)
	for p := range int32(2) {
		if code, _ := produceCode(t, c.do(produceReq(9, -1, "lim", p, records(t, "a", "b", "c", "d", "e", "f", "g", "h")))); code != 0 {
			t.Fatalf("produce: code %d", code)
		}
	}
	setShareConfigs(t, t.Context(), newKgo(t, tn.addr), "g", map[string]string{"share.auto.offset.reset": "earliest"})
	info, err := tn.backend.Topic("lim")
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		name       string
		version    int16
		mode       int8
		maxRecords int32
	}{
		{name: "record limit", version: 2, mode: 1, maxRecords: 3},
		{name: "batch optimized", version: 2, mode: 0, maxRecords: 5},
		{name: "version 1", version: 1, maxRecords: 1},
	} {
		member := string(rune('a' + i))
		c.join("g", member, "lim")
		req := kmsg.NewPtrShareFetchRequest()
		req.SetVersion(tc.version)
		req.GroupID, req.MemberID = kmsg.StringPtr("g"), kmsg.StringPtr(member)
		req.MaxBytes, req.MaxRecords, req.BatchSize, req.ShareAcquireMode = 1<<20, tc.maxRecords, tc.maxRecords, tc.mode
		rt := kmsg.NewShareFetchRequestTopic()
		rt.TopicID = topicID(info)
		for p := range int32(2) {
			rp := kmsg.NewShareFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes = p, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp := c.do(req).(*kmsg.ShareFetchResponse)
		acq, sent := 0, 0
		for _, p := range acquired(resp) {
			acq += len(p)
		}
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				recs, err := batch.Records(p.Records, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				sent += len(recs)
			}
		}
		if resp.ErrorCode != 0 || acq != int(tc.maxRecords) || sent != acq {
			t.Errorf("%s: code %d, %d acquired and %d sent; want %d", tc.name, resp.ErrorCode, acq, sent, tc.maxRecords)
		}
	}
}

// TestKgoShareMaxRecordsStrict: kgo's ShareMaxRecordsStrict (record-limit
// mode) gets at most ShareMaxRecords records per fetch while it drains a
// topic.
func TestKgoShareMaxRecordsStrict(t *testing.T) {
	tn := startNode(t, withShare(time.Minute, time.Minute, 10))
	tn.createTopic("strict", 2, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	setShareConfigs(t, ctx, newKgo(t, tn.addr), "s", map[string]string{"share.auto.offset.reset": "earliest"})
	produceValues(t, ctx, tn.addr, "strict", 0, 20, 5)
	cl, err := kgo.NewClient(kgo.SeedBrokers(tn.addr), kgo.ShareGroup("s"), kgo.ConsumeTopics("strict"),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.ShareMaxRecords(3), kgo.ShareMaxRecordsStrict())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	total := 0
	for total < 20 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			r.Ack(kgo.AckAccept)
		})
		if n > 3 {
			t.Fatalf("one poll got %d records, want at most 3", n)
		}
		total += n
	}
	if total != 20 {
		t.Fatalf("consumed %d of 20 records", total)
	}
}
