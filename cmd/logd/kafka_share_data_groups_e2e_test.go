package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/internal/e2e"
)

// TestClusterDataGroupsKafkaShare: a share group over a topic placed over
// data groups, on three processes with two groups per node, each group
// led by its preferred leader, so the meta leader (the share
// coordinator) leads only two of the six and Metadata names three
// partition leaders. kgo's share consumers, seeded at each node, send
// ShareFetch and ShareAcknowledge to each partition's leader; the nodes
// that do not lead the meta group forward them to the coordinator. A
// share consumer in a process of its own (TestKafkaShareMemberProcess),
// seeded at a node that does not lead, takes records of the first half,
// some of a partition another node leads, and holds them; once the
// workers joined it is SIGKILLed, and the records it held reach the
// workers, released by the close of its connections, which the nodes
// they reached tell the coordinator: the lock lasts 10 minutes and the
// session timeout 5. The second half is produced while the workers
// consume. Every record ends accepted once or, one in ten, rejected once
// and dead-lettered once; no lease expires. The default run has 600
// records of 6 partitions; LOGD_FAULT_LONG=1 (make fault) 12,000 of 12
// and two holders.
func TestClusterDataGroupsKafkaShare(t *testing.T) {
	e2e.ParallelShort(t)
	n, parts, holders := 600, int32(6), 1
	if e2e.FaultLong() {
		n, parts, holders = 12_000, 12, 2
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := &e2e.Cluster{T: t}
	kaddrs := map[string]string{}
	for i := range 3 {
		id := fmt.Sprintf("n%d", i+1)
		kaddrs[id] = e2e.FreeAddr(t)
		c.Nodes = append(c.Nodes, e2e.NewNode(t, id, "--kafka-listen", kaddrs[id], "--data-groups-per-node", "2",
			"--kafka-share-session-timeout", "5m"))
	}
	c.Start()
	started := time.Now()
	var metaLeader string
	e2e.WaitFor(t, ctx, "six data groups led by their preferred leaders", func() bool {
		st, err := clusterStatus(t, c.Nodes[0])
		if err != nil || len(st.DataGroups) != 6 || st.LeaderID == "" {
			return false
		}
		others := 0
		for _, g := range st.DataGroups {
			if g.Leader != g.Replicas[0] || len(g.Voters) != 3 {
				return false
			}
			if g.Leader != st.LeaderID {
				others++
			}
		}
		metaLeader = st.LeaderID
		return others > 0
	})
	const topic, group = "share-dg", "workers"
	e2e.CreateTopic(t, ctx, c.Nodes[0], topic, parts, nil)
	var follower string // a node that does not lead the meta group
	for id := range kaddrs {
		if id != metaLeader {
			follower = id
			break
		}
	}

	admin, err := kgo.NewClient(kgo.SeedBrokers(kaddrs[follower]), kgo.DefaultProduceTopic(topic), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	// The share coordinator, which describes the group's members.
	coord, err := kgo.NewClient(kgo.SeedBrokers(kaddrs[metaLeader]))
	if err != nil {
		t.Fatal(err)
	}
	defer coord.Close()
	// A share group's settings are replicated: set through a node that
	// does not lead the meta group, which hands them to the leader, and
	// described there.
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for k, v := range map[string]string{"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "600000", "share.delivery.count.limit": "5"} {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = k, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(v)
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, admin.SeedBrokers()[0])
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("alter group configs through %s, not the meta leader: %+v, %v", follower, resp, err)
	}
	{
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(ctx, admin.SeedBrokers()[0])
		if err != nil || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("describe group configs through %s: %+v, %v", follower, resp, err)
		}
		for _, c := range resp.Resources[0].Configs {
			if c.Name == "share.auto.offset.reset" && (c.Value == nil || *c.Value != "earliest") {
				t.Fatalf("described through %s: %s=%v", follower, c.Name, c.Value)
			}
		}
	}
	partOf := map[string]int32{}
	produce := func(from, to int) {
		t.Helper()
		recs := make([]*kgo.Record, 0, to-from)
		for i := from; i < to; i++ {
			// Keyed, so that they spread over the partitions.
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "r-%06d", i)})
		}
		if err := admin.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			partOf[string(r.Value)] = r.Partition
		}
	}
	produce(0, n/2)
	// The partitions the meta leader's Kafka listener leads.
	metaParts := map[int32]bool{}
	{
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, admin)
		if err != nil || len(resp.Topics) != 1 {
			t.Fatalf("metadata: %v", err)
		}
		var metaBroker int32 = -1
		for _, b := range resp.Brokers {
			if fmt.Sprintf("%s:%d", b.Host, b.Port) == kaddrs[metaLeader] {
				metaBroker = b.NodeID
			}
		}
		for _, p := range resp.Topics[0].Partitions {
			metaParts[p.Partition] = p.Leader == metaBroker
		}
	}
	rejects := func(v string) bool {
		i, _ := strconv.Atoi(strings.TrimPrefix(v, "r-"))
		return i%10 == 0
	}

	held := map[string]bool{}
	var ms []*shareMember
	for range holders {
		m := startShareMember(t, ctx, shareMemberSpec{Addr: kaddrs[follower], Group: group, Topic: topic})
		ms = append(ms, m)
		for _, v := range m.heldValues() {
			if held[v] {
				t.Fatalf("%s held by two members", v)
			}
			held[v] = true
		}
	}

	// The workers, one seeded at each node: each record is accepted,
	// or rejected when rejects says so.
	var mu sync.Mutex
	done := map[string][]int32{} // value -> the delivery counts it was finished at
	var wg sync.WaitGroup
	var clients []*kgo.Client
	for _, id := range []string{"n1", "n2", "n3"} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(kaddrs[id]), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
			kgo.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				fs := cl.PollRecords(ctx, 100)
				if fs.IsClientClosed() || ctx.Err() != nil {
					return
				}
				mu.Lock()
				for _, r := range fs.Records() {
					v := string(r.Value)
					done[v] = append(done[v], r.DeliveryCount())
					if rejects(v) {
						r.Ack(kgo.AckReject)
					} else {
						r.Ack(kgo.AckAccept)
					}
				}
				mu.Unlock()
			}
		}()
		clients = append(clients, cl)
	}
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
		wg.Wait()
	}()
	// The holders' clients may hold more than they polled (fetched
	// ahead), which only their end gives back.
	e2e.WaitFor(t, ctx, "the workers in the group", func() bool {
		return shareGroupMembers(t, ctx, coord, group) == holders+3
	})
	for _, m := range ms {
		m.cmd.Process.Signal(syscall.SIGKILL)
	}
	produce(n/2, n)
	var acked, dead, nacked, expired int64
	var last *logdv1.DescribeQueueGroupResponse
	finished := func() bool {
		q, err := c.Nodes[0].RPC.DescribeQueueGroup(ctx, connect.NewRequest(&logdv1.DescribeQueueGroupRequest{Topic: topic, Group: group}))
		if err != nil {
			return false
		}
		last = q.Msg
		acked, dead, nacked, expired = 0, 0, 0, 0
		for _, p := range q.Msg.Partitions {
			acked, dead, nacked, expired = acked+p.Acked, dead+p.DeadLettered, nacked+p.Nacked, expired+p.Expired
		}
		return acked+dead == int64(n)
	}
	for !finished() {
		if ctx.Err() != nil {
			mu.Lock()
			var missing []string
			for i := range n {
				if v := fmt.Sprintf("r-%06d", i); len(done[v]) == 0 {
					missing = append(missing, fmt.Sprintf("%s@%d", v, partOf[v]))
				}
			}
			mu.Unlock()
			t.Logf("in flight:\n%s", e2e.Tail(e2e.Logctl(t, c.Nodes[0], "queue", "describe", topic, group, "--in-flight"), 4000))
			t.Fatalf("not every record finished: queue group %v; partitions the meta leader leads %v; not finished by the workers (%d): %v",
				last, metaParts, len(missing), missing)
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantDead := int64(0)
	elsewhere := 0 // records the holders had, of partitions another node leads
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		v := fmt.Sprintf("r-%06d", i)
		if rejects(v) {
			wantDead++
		}
		if ds := done[v]; (held[v] || len(ds) > 0 && ds[0] > 1) && !metaParts[partOf[v]] {
			elsewhere++
		}
		switch ds := done[v]; {
		case len(ds) != 1:
			t.Errorf("%s finished by the workers %d times (delivery counts %v), want once", v, len(ds), ds)
		case held[v] && ds[0] != 2:
			t.Errorf("%s held by the killed member: finished at delivery %d, want 2", v, ds[0])
		}
	}
	if dead != wantDead || acked != int64(n)-wantDead || expired != 0 || nacked < int64(len(held)) {
		t.Errorf("the queue group: %d acked, %d dead-lettered, %d leases expired, %d released; want %d, %d, 0 and at least the %d held",
			acked, dead, expired, nacked, int64(n)-wantDead, wantDead, len(held))
	}
	if elsewhere == 0 {
		t.Errorf("the holders had no record of a partition the meta leader does not lead (%d polled)", len(held))
	}
	t.Logf("%s after the cluster started: meta leader %s; %d records of %d partitions finished through every node, %d polled by %d killed members released (%d records they had of partitions other nodes lead)",
		time.Since(started).Round(time.Millisecond), metaLeader, n, parts, len(held), holders, elsewhere)
}
