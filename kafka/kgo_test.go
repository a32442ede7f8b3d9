package kafka

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/replication/replicationtest"
)

// Tests with franz-go's kgo, a real client, against an in-process node:
// it negotiates versions from ApiVersions, routes requests by Metadata
// (produce and fetch to the partition leader, administration to the
// controller), and verifies CRCs on fetch.

func newKgo(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RetryTimeout(20 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestKgoProduceConsumeEveryCodec produces with acks=all (kgo's defaults
// otherwise: an idempotent producer, so every batch goes through its
// partition's producer state) once per compression codec, then consumes the
// topic from the start and finds every record, with its key and headers,
// by value; offsets are dense in every partition.
func TestKgoProduceConsumeEveryCodec(t *testing.T) {
	produceConsumeEveryCodec(t, startNode(t))
}

// TestKgoDataGroups is TestKgoProduceConsumeEveryCodec on a node with
// three data groups, over which the topic's partitions are placed: each
// produce is split by group and each group's producer state judges its
// batches (docs/architecture.md, "Data groups").
func TestKgoDataGroups(t *testing.T) {
	tn := startNodeWith(t, replicationtest.Options{DataGroupsPerNode: 3})
	produceConsumeEveryCodec(t, tn)
	topic, err := tn.node.FSM().Topic("codecs")
	if err != nil || len(topic.Placement) != 3 || len(placementGroups(topic.Placement)) != 3 {
		t.Errorf("codecs is not placed over the three data groups: %v, %v", topic.Placement, err)
	}
}

// placementGroups are the distinct groups of a placement.
func placementGroups(pl []uint64) map[uint64]bool {
	out := map[uint64]bool{}
	for _, g := range pl {
		out[g] = true
	}
	return out
}

// produceConsumeEveryCodec is TestKgoProduceConsumeEveryCodec on tn.
func produceConsumeEveryCodec(t *testing.T, tn *testNode) {
	tn.createTopic("codecs", 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	codecs := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	const perCodec = 500
	want := map[string]*kgo.Record{}
	for name, codec := range codecs {
		cl := newKgo(t, tn.addr, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(codec),
			kgo.DefaultProduceTopic("codecs"), kgo.ProducerLinger(5*time.Millisecond))
		recs := make([]*kgo.Record, perCodec)
		for i := range recs {
			v := fmt.Sprintf("%s-%04d", name, i)
			recs[i] = &kgo.Record{Key: []byte(strconv.Itoa(i % 17)), Value: []byte(v),
				Headers: []kgo.RecordHeader{{Key: "codec", Value: []byte(name)}}}
			want[v] = recs[i]
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", name, err)
		}
		cl.Close()
	}

	cl := newKgo(t, tn.addr, kgo.ConsumeTopics("codecs"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]*kgo.Record{}
	offsets := map[int32][]int64{}
	for len(got) < len(want) {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(got), len(want), err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if _, dup := got[string(r.Value)]; dup {
				t.Errorf("%q consumed twice", r.Value)
			}
			got[string(r.Value)] = r
			offsets[r.Partition] = append(offsets[r.Partition], r.Offset)
		})
	}
	for v, w := range want {
		g, ok := got[v]
		switch {
		case !ok:
			t.Errorf("%q not consumed", v)
		case string(g.Key) != string(w.Key) || len(g.Headers) != 1 || g.Headers[0].Key != "codec" || string(g.Headers[0].Value) != string(w.Headers[0].Value):
			t.Errorf("%q: key %q headers %v; want key %q headers %v", v, g.Key, g.Headers, w.Key, w.Headers)
		case g.Partition != w.Partition || g.Offset != w.Offset:
			t.Errorf("%q consumed at %d@%d, acknowledged at %d@%d", v, g.Partition, g.Offset, w.Partition, w.Offset)
		}
	}
	for p, offs := range offsets {
		slices.Sort(offs)
		for i, o := range offs {
			if o != int64(i) {
				t.Fatalf("partition %d: offset %d at position %d; want dense offsets from 0", p, o, i)
			}
		}
	}
	// The batches are stored as kgo sent them, compressed.
	stored := map[batch.Compression]bool{}
	for p := range int32(3) {
		for off := int64(0); ; {
			r, err := tn.backend.Read("codecs", p, off, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Batches) == 0 {
				break
			}
			for rest := r.Batches; len(rest) > 0; {
				info, err := batch.Peek(rest)
				if err != nil {
					t.Fatal(err)
				}
				stored[info.Compression()] = true
				off, rest = info.NextOffset(), rest[info.Length:]
			}
		}
	}
	if len(stored) != len(codecs) {
		t.Errorf("stored batches use codecs %v; want all of %d", stored, len(codecs))
	}
}

// TestKgoAdmin drives topic administration and offset listing through kgo,
// which sends CreateTopics and DeleteTopics to the controller Metadata
// names and the rest where they belong.
func TestKgoAdmin(t *testing.T) {
	tn := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newKgo(t, tn.addr)

	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "admin", 2, -1
	ct.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "cleanup.policy", Value: kmsg.StringPtr("compact")}}
	create.Topics = append(create.Topics, ct)
	cresp, err := create.RequestWith(ctx, cl)
	if err != nil || cresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, cresp)
	}
	if info, err := tn.backend.Topic("admin"); err != nil || info.Partitions != 2 || info.Config["cleanup.policy"] != "compact" {
		t.Fatalf("created topic: %+v %v", info, err)
	}
	// Again: TOPIC_ALREADY_EXISTS.
	if again, err := create.RequestWith(ctx, cl); err != nil || again.Topics[0].ErrorCode != errTopicAlreadyExists {
		t.Fatalf("create again: %v %+v", err, again)
	}

	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ar := kmsg.NewIncrementalAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, "admin"
	ar.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{
		{Name: "cleanup.policy", Op: kmsg.IncrementalAlterConfigOpAppend, Value: kmsg.StringPtr("delete")},
		{Name: "retention.ms", Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr("60000")},
	}
	alter.Resources = append(alter.Resources, ar)
	if aresp, err := alter.RequestWith(ctx, cl); err != nil || aresp.Resources[0].ErrorCode != 0 {
		t.Fatalf("alter: %v %+v", err, aresp)
	}
	describe := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeTopic, "admin"
	dr.ConfigNames = []string{"cleanup.policy", "retention.ms", "segment.bytes"}
	describe.Resources = append(describe.Resources, dr)
	dresp, err := describe.RequestWith(ctx, cl)
	if err != nil || dresp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe: %v %+v", err, dresp)
	}
	got := map[string]string{}
	for _, c := range dresp.Resources[0].Configs {
		got[c.Name] = fmt.Sprintf("%s/%s", *c.Value, c.Source)
	}
	want := map[string]string{"cleanup.policy": "compact,delete/DYNAMIC_TOPIC_CONFIG", "retention.ms": "60000/DYNAMIC_TOPIC_CONFIG", "segment.bytes": "1073741824/DEFAULT_CONFIG"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("described %v; want %v", got, want)
	}
	// A value the topic settings refuse, and DELETE back to the default.
	alter.Resources[0].Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr("soon")}}
	if aresp, err := alter.RequestWith(ctx, cl); err != nil || aresp.Resources[0].ErrorCode != errInvalidConfig {
		t.Fatalf("alter to an invalid value: %v %+v", err, aresp)
	}
	alter.Resources[0].Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Op: kmsg.IncrementalAlterConfigOpDelete}}
	if aresp, err := alter.RequestWith(ctx, cl); err != nil || aresp.Resources[0].ErrorCode != 0 {
		t.Fatalf("delete a setting: %v %+v", err, aresp)
	}
	if info, _ := tn.backend.Topic("admin"); info.Config["retention.ms"] != "604800000" {
		t.Errorf("retention.ms %q after DELETE; want the default", info.Config["retention.ms"])
	}

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{"admin"}
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("admin")
	del.Topics = append(del.Topics, dt)
	if dresp, err := del.RequestWith(ctx, cl); err != nil || dresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete: %v %+v", err, dresp)
	}
	if _, err := tn.backend.Topic("admin"); err == nil {
		t.Fatal("topic still exists after DeleteTopics")
	}
}

// TestKgoListOffsets lists earliest, latest, by timestamp and the record
// with the largest timestamp, which need not be the last one.
func TestKgoListOffsets(t *testing.T) {
	tn := startNode(t)
	tn.createTopic("times", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newKgo(t, tn.addr, kgo.DefaultProduceTopic("times"))
	t0 := time.UnixMilli(1_700_000_000_000)
	stamps := []time.Duration{0, 1, 2, 50, 3, 4, 5, 6, 7, 8} // seconds after t0; record 3 is the latest
	for i, s := range stamps {
		// One batch per call, so the time index has several batches.
		r := &kgo.Record{Value: []byte(strconv.Itoa(i)), Timestamp: t0.Add(s * time.Second)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "times"
	cases := []struct {
		ts, offset, stamp int64
	}{
		{-2, 0, -1},
		{-1, 10, -1},
		{-3, 3, t0.Add(50 * time.Second).UnixMilli()},
		{t0.Add(4500 * time.Millisecond).UnixMilli(), 3, t0.Add(50 * time.Second).UnixMilli()}, // record 3 (50 s) is the first at or after 4.5 s
		{t0.Add(5 * time.Second).UnixMilli(), 3, t0.Add(50 * time.Second).UnixMilli()},
		{t0.Add(51 * time.Second).UnixMilli(), -1, -1},
		{t0.UnixMilli(), 0, t0.UnixMilli()},
	}
	for _, c := range cases {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = c.ts
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	// kgo shards ListOffsets by partition; one partition comes back whole.
	var ps []kmsg.ListOffsetsResponseTopicPartition
	for _, rt := range resp.Topics {
		ps = append(ps, rt.Partitions...)
	}
	if len(ps) != len(cases) {
		t.Fatalf("%d answers for %d questions", len(ps), len(cases))
	}
	for i, c := range cases {
		if p := ps[i]; p.ErrorCode != 0 || p.Offset != c.offset || p.Timestamp != c.stamp {
			t.Errorf("timestamp %d: offset %d timestamp %d (code %d); want %d, %d", c.ts, p.Offset, p.Timestamp, p.ErrorCode, c.offset, c.stamp)
		}
	}
}
