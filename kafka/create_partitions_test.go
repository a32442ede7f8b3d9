package kafka

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createPartitionsVersionCase is TestEveryAdvertisedVersion's case of
// CreatePartitions: version v grows topic "grown" to v+2 partitions.
func createPartitionsVersionCase(t *testing.T, tn *testNode, c *rawClient, v int16, name string) {
	t.Helper()
	if v == 0 {
		tn.createTopic("grown", 1, nil)
	}
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.SetVersion(v)
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "grown", int32(v)+2
	req.Topics = append(req.Topics, rt)
	resp := c.do(req).(*kmsg.CreatePartitionsResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Errorf("%s: %+v", name, resp.Topics)
	}
	if info, _ := tn.backend.Topic("grown"); info.Partitions != rt.Count {
		t.Errorf("%s: grown has %d partitions, want %d", name, info.Partitions, rt.Count)
	}
}

// TestKgoCreatePartitions: kadm grows a topic that a kgo group member
// consumes; the member picks the new partitions up at its metadata
// refresh (its group rejoins) and reads what a producer writes to them,
// from offset 0. A validation changes nothing; the count the topic has, a
// smaller one and a replica assignment are refused with Kafka's codes.
func TestKgoCreatePartitions(t *testing.T) {
	tn := startNode(t, fastGroups)
	tn.createTopic("grow", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := newConsumed()
	m := startGroupMember(t, ctx, tn.addr, "a", "g", "grow", c, kgo.MetadataMinAge(50*time.Millisecond), kgo.MetadataMaxAge(200*time.Millisecond))
	produceValues(t, ctx, tn.addr, "grow", 0, 10, 5)
	waitFor(t, 30*time.Second, "the records before the growth consumed", func() bool { n, _ := c.total(); return n == 10 })

	admKgo := newKgo(t, tn.addr)
	adm := kadm.NewClient(admKgo)
	partitions := func() int32 {
		t.Helper()
		info, err := tn.backend.Topic("grow")
		if err != nil {
			t.Fatal(err)
		}
		return info.Partitions
	}
	// topicErr is the topic's outcome of a kadm call that was answered.
	topicErr := func(rs kadm.CreatePartitionsResponses, err error) error {
		t.Helper()
		if err != nil {
			t.Fatalf("request: %v", err)
		}
		return rs["grow"].Err
	}
	if err := topicErr(adm.ValidateCreatePartitions(ctx, 2, "grow")); err != nil || partitions() != 1 {
		t.Fatalf("validate adding 2: %v, %d partitions", err, partitions())
	}
	for _, set := range []int{1, 0} {
		if err := topicErr(adm.UpdatePartitions(ctx, set, "grow")); !errors.Is(err, kerr.InvalidPartitions) {
			t.Fatalf("set the count to %d: %v, want INVALID_PARTITIONS", set, err)
		}
	}
	withAssignment := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "grow", 2
	rt.Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{{Replicas: []int32{1}}}
	withAssignment.Topics = append(withAssignment.Topics, rt)
	resp, err := withAssignment.RequestWith(ctx, admKgo)
	if err != nil || resp.Topics[0].ErrorCode != errInvalidReplicaAssignment || partitions() != 1 {
		t.Fatalf("with a replica assignment: %+v, %v, %d partitions", resp, err, partitions())
	}
	if err := topicErr(adm.CreatePartitions(ctx, 2, "grow")); err != nil || partitions() != 3 {
		t.Fatalf("add 2: %v, %d partitions", err, partitions())
	}
	td, err := adm.ListTopics(ctx, "grow")
	if err != nil || len(td["grow"].Partitions) != 3 {
		t.Fatalf("metadata after the growth: %+v, %v", td["grow"], err)
	}

	prod := newKgo(t, tn.addr, kgo.DefaultProduceTopic("grow"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, p := range []int32{1, 2} {
		r := &kgo.Record{Value: []byte("new-" + string('0'+rune(p))), Partition: p}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil || r.Offset != 0 {
			t.Fatalf("produce to new partition %d: offset %d, %v", p, r.Offset, err)
		}
	}
	waitFor(t, 30*time.Second, "the records of the new partitions consumed", func() bool { n, _ := c.total(); return n == 12 })
	m.stop(t)
	for _, p := range []string{"a/1", "a/2"} {
		if first := c.firstOf(p); first != 0 {
			t.Errorf("%s first consumed at offset %d, want 0", p, first)
		}
	}
}
