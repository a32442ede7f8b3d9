package main

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
)

// TestKafkaAdminOnFollower: on a three-node cluster, CreateTopics,
// IncrementalAlterConfigs, AlterConfigs, CreatePartitions and DeleteTopics
// sent to a follower's Kafka port (kgo, addressing that broker) are
// forwarded to the leader, as Kafka's brokers forward them to their
// controller, instead of NOT_CONTROLLER: each answers without an error, the leader's state shows
// the change, and so does the follower's when it answered. sarama's
// ClusterAdmin, bootstrapped from the follower alone, alters a setting
// (IncrementalAlterConfigs, sent to any broker and not retried on
// NOT_CONTROLLER).
func TestKafkaAdminOnFollower(t *testing.T) {
	c := &e2e.Cluster{T: t}
	kaddrs := map[string]string{}
	for i := range 3 {
		id := fmt.Sprintf("n%d", i+1)
		kaddrs[id] = e2e.FreeAddr(t)
		c.Nodes = append(c.Nodes, e2e.NewNode(t, id, "--kafka-listen", kaddrs[id]))
	}
	c.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	leader := c.Leader(ctx)
	var follower *e2e.Node
	for _, nd := range c.Nodes {
		if nd != leader {
			follower = nd
			break
		}
	}
	var brokerID int32
	fmt.Sscanf(follower.ID, "n%d", &brokerID)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kaddrs[follower.ID]))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	lc, err := client.New(leader.Listen, client.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	fc, err := client.New(follower.Listen, client.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	// on sends req to the follower's broker.
	on := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := cl.Broker(int(brokerID)).Request(ctx, req)
		if err != nil {
			t.Fatalf("%T to the follower: %v", req, err)
		}
		return resp
	}
	config := func(c *client.Client, key string) string {
		t.Helper()
		d, err := c.DescribeTopic(ctx, "fwd")
		if err != nil {
			t.Fatal(err)
		}
		return d.Topic.Config[key]
	}
	str := func(s string) *string { return &s }

	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "fwd", 3, -1
	ct.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: str("3600000")}}
	create.Topics = append(create.Topics, ct)
	if got := on(create).(*kmsg.CreateTopicsResponse).Topics[0]; got.ErrorCode != 0 || got.NumPartitions != 3 {
		t.Fatalf("CreateTopics on the follower: code %d (%v), %d partitions", got.ErrorCode, got.ErrorMessage, got.NumPartitions)
	}
	if config(lc, "retention.ms") != "3600000" || config(fc, "retention.ms") != "3600000" {
		t.Fatal("the topic created through the follower lacks its setting")
	}

	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ir := kmsg.NewIncrementalAlterConfigsRequestResource()
	ir.ResourceType, ir.ResourceName = kmsg.ConfigResourceTypeTopic, "fwd"
	ir.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Op: kmsg.IncrementalAlterConfigOpSet, Value: str("7200000")}}
	inc.Resources = append(inc.Resources, ir)
	if got := on(inc).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; got.ErrorCode != 0 {
		t.Fatalf("IncrementalAlterConfigs on the follower: code %d (%v)", got.ErrorCode, got.ErrorMessage)
	}
	if config(lc, "retention.ms") != "7200000" || config(fc, "retention.ms") != "7200000" {
		t.Fatal("IncrementalAlterConfigs through the follower did not change the setting")
	}

	alter := kmsg.NewPtrAlterConfigsRequest()
	ar := kmsg.NewAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, "fwd"
	ar.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "cleanup.policy", Value: str("compact")}}
	alter.Resources = append(alter.Resources, ar)
	if got := on(alter).(*kmsg.AlterConfigsResponse).Resources[0]; got.ErrorCode != 0 {
		t.Fatalf("AlterConfigs on the follower: code %d (%v)", got.ErrorCode, got.ErrorMessage)
	}
	if config(lc, "cleanup.policy") != "compact" || config(lc, "retention.ms") != "604800000" {
		t.Fatal("AlterConfigs through the follower did not replace the settings")
	}

	// A refusal the follower finds itself keeps its precise code.
	bad := kmsg.NewPtrIncrementalAlterConfigsRequest()
	br := kmsg.NewIncrementalAlterConfigsRequestResource()
	br.ResourceType, br.ResourceName = kmsg.ConfigResourceTypeTopic, "fwd"
	br.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Op: kmsg.IncrementalAlterConfigOpSet, Value: str("soon")}}
	bad.Resources = append(bad.Resources, br)
	if got := on(bad).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; got.ErrorCode != 40 { // INVALID_CONFIG
		t.Fatalf("a bad setting on the follower: code %d (%v), want INVALID_CONFIG", got.ErrorCode, got.ErrorMessage)
	}

	// sarama's admin, which knows only the follower.
	cfg := saramaConfig()
	admin, err := sarama.NewClusterAdmin([]string{kaddrs[follower.ID]}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	v := "1800000"
	if err := admin.IncrementalAlterConfig(sarama.TopicResource, "fwd", map[string]sarama.IncrementalAlterConfigsEntry{
		"retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &v},
	}, false); err != nil {
		t.Fatalf("sarama IncrementalAlterConfig through the follower: %v", err)
	}
	if config(lc, "retention.ms") != v {
		t.Fatal("sarama's change did not reach the leader")
	}

	grow := kmsg.NewPtrCreatePartitionsRequest()
	gt := kmsg.NewCreatePartitionsRequestTopic()
	gt.Topic, gt.Count = "fwd", 5
	grow.Topics = append(grow.Topics, gt)
	if got := on(grow).(*kmsg.CreatePartitionsResponse).Topics[0]; got.ErrorCode != 0 {
		t.Fatalf("CreatePartitions on the follower: code %d (%v)", got.ErrorCode, got.ErrorMessage)
	}
	for _, c := range []*client.Client{lc, fc} {
		if d, err := c.DescribeTopic(ctx, "fwd"); err != nil || d.Topic.Partitions != 5 {
			t.Fatalf("after CreatePartitions through the follower: %+v, %v; want 5 partitions", d.Topic, err)
		}
	}

	del := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = str("fwd")
	del.Topics = append(del.Topics, dt)
	del.TopicNames = []string{"fwd"}
	if got := on(del).(*kmsg.DeleteTopicsResponse).Topics[0]; got.ErrorCode != 0 {
		t.Fatalf("DeleteTopics on the follower: code %d (%v)", got.ErrorCode, got.ErrorMessage)
	}
	for _, c := range []*client.Client{lc, fc} {
		if _, err := c.DescribeTopic(ctx, "fwd"); err == nil {
			t.Fatal("the topic deleted through the follower still exists")
		}
	}
}

// TestKafkaISR: the leader's Metadata lists as in-sync replicas the
// voters that answered it lately: all three, then two once a follower is
// killed (5 s after its last answer), then three again once it is back.
func TestKafkaISR(t *testing.T) {
	e2e.ParallelShort(t)
	c := &e2e.Cluster{T: t}
	var kaddr string
	kaddrs := map[string]string{}
	for i := range 3 {
		id := fmt.Sprintf("n%d", i+1)
		kaddrs[id] = e2e.FreeAddr(t)
		c.Nodes = append(c.Nodes, e2e.NewNode(t, id, "--kafka-listen", kaddrs[id]))
	}
	c.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	leader := c.Leader(ctx)
	kaddr = kaddrs[leader.ID]
	e2e.CreateTopic(t, ctx, leader, "isr", 1, nil)
	var victim *e2e.Node
	for _, nd := range c.Nodes {
		if nd != leader {
			victim = nd
		}
	}
	var victimID int32
	fmt.Sscanf(victim.ID, "n%d", &victimID)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kaddr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// The ISR as the partition's leader lists it (its data group's
	// leader, when the topic is placed over data groups; another node
	// cannot tell and lists every voter), asked at any live node first.
	isr := func() (replicas, isr []int32) {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("isr")
		req.Topics = append(req.Topics, rt)
		ask := func(b *kgo.Broker) *kmsg.MetadataResponse {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			resp, err := b.Request(rctx, req)
			if err != nil {
				return nil
			}
			return resp.(*kmsg.MetadataResponse)
		}
		resp := ask(cl.SeedBrokers()[0])
		if resp == nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return nil, nil
		}
		p := resp.Topics[0].Partitions[0]
		for _, b := range resp.Brokers {
			if b.NodeID != p.Leader {
				continue
			}
			if at := ask(cl.Broker(int(b.NodeID))); at != nil && len(at.Topics) == 1 && len(at.Topics[0].Partitions) == 1 && at.Topics[0].Partitions[0].Leader == p.Leader {
				p = at.Topics[0].Partitions[0]
			} else {
				return nil, nil
			}
		}
		return p.Replicas, p.ISR
	}
	waitISR := func(what string, want int, in bool) {
		t.Helper()
		e2e.WaitFor(t, ctx, what, func() bool {
			replicas, got := isr()
			return len(replicas) == 3 && len(got) == want && slices.Contains(got, victimID) == in
		})
	}
	waitISR("all three voters in sync", 3, true)
	victim.Kill()
	waitISR(victim.ID+" out of the ISR once killed", 2, false)
	victim.Launch("")
	waitISR(victim.ID+" back in the ISR", 3, true)
}
