package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clusterStatus is logctl cluster status --output json, from nd.
func clusterStatus(t *testing.T, nd *e2e.Node) (client.ClusterStatus, error) {
	t.Helper()
	var st client.ClusterStatus
	out := e2e.Logctl(t, nd, "cluster", "status", "--output", "json")
	err := json.Unmarshal([]byte(out), &st)
	return st, err
}

// TestClusterDataGroups: three processes with two data groups per node.
// Once all have joined, logctl cluster status shows six groups, each with
// three voters and led by its preferred leader, and each node leading
// two. A node killed with SIGKILL leaves every group led by the others;
// back, it leads its groups again.
func TestClusterDataGroups(t *testing.T) {
	e2e.ParallelShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := e2e.NewCluster(t, 3, "--data-groups-per-node", "2")
	all := []string{"n1", "n2", "n3"}
	var st client.ClusterStatus
	settled := func(nd *e2e.Node, live []string) func() bool {
		return func() bool {
			var err error
			if st, err = clusterStatus(t, nd); err != nil || len(st.DataGroups) != 6 {
				return false
			}
			for _, g := range st.DataGroups {
				v := slices.Clone(g.Voters)
				slices.Sort(v)
				if !slices.Equal(v, all) || g.Lag != 0 || !slices.Contains(live, g.Leader) {
					return false
				}
				if slices.Contains(live, g.Replicas[0]) && g.Leader != g.Replicas[0] {
					return false
				}
			}
			return true
		}
	}
	e2e.WaitFor(t, ctx, "six data groups of three voters, led by their preferred leaders", settled(c.Nodes[0], all))
	for _, n := range st.Nodes {
		if n.LeadsGroups != 2 {
			t.Errorf("%s leads %d data groups, want 2: %+v", n.ID, n.LeadsGroups, st.DataGroups)
		}
	}
	// Each node's metrics show its six replicas and the two it leads.
	for _, nd := range c.Nodes {
		series := scrapeSeries(t, "http://"+nd.Listen+"/metrics")
		replicas, leads := 0, 0.0
		for k, v := range series {
			if strings.HasPrefix(k, "logd_data_group_leader{") {
				replicas++
				leads += v
			}
		}
		if replicas != 6 || leads != 2 {
			t.Errorf("%s's metrics: %d data group replicas, leading %v; want 6 and 2", nd.ID, replicas, leads)
		}
	}
	text := e2e.Logctl(t, c.Nodes[0], "cluster", "status")
	for _, want := range []string{"LEADS", "Data groups: 6", "GROUP", "PREFERRED", "VOTERS", "PARTITIONS", "SIZE"} {
		if !strings.Contains(text, want) {
			t.Errorf("cluster status lacks %q:\n%s", want, text)
		}
	}

	// SIGKILL n2: its groups elect leaders among n1 and n3.
	victim := c.Nodes[1]
	led := 0
	for _, g := range st.DataGroups {
		if g.Leader == victim.ID {
			led++
		}
	}
	start := time.Now()
	victim.Kill()
	e2e.WaitFor(t, ctx, "every data group led without n2", func() bool {
		s, err := clusterStatus(t, c.Nodes[0])
		if err != nil || len(s.DataGroups) != 6 {
			return false
		}
		for _, g := range s.DataGroups {
			if g.Leader == "" || g.Leader == victim.ID {
				return false
			}
		}
		return true
	})
	t.Logf("n2 led %d data groups; every group led again %v after its SIGKILL (as seen by polling logctl)", led, time.Since(start).Round(time.Millisecond))

	victim.Launch(c.Nodes[0].Listen)
	e2e.WaitFor(t, ctx, "n2 back, leading its groups", settled(c.Nodes[0], all))
}

// TestClusterDataGroupsKillAndCatchUp: three processes with data groups,
// producers writing a 12-partition topic through two nodes; the third is
// killed with SIGKILL, the groups go on writing past their trailing logs
// (snapshots every 32 entries, 16 kept), and the third comes back and
// catches up each group by installing its snapshot and fetching segment
// bytes from a peer. Every acknowledged record is then on every node, at
// the same offset, once.
func TestClusterDataGroupsKillAndCatchUp(t *testing.T) {
	e2e.ParallelShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := e2e.NewCluster(t, 3, "--data-groups-per-node", "2", "--snapshot-threshold", "32", "--snapshot-interval", "200ms", "--raft-trailing-logs", "16")
	e2e.WaitFor(t, ctx, "six data groups led", func() bool {
		st, err := clusterStatus(t, c.Nodes[0])
		if err != nil || len(st.DataGroups) != 6 {
			return false
		}
		for _, g := range st.DataGroups {
			if g.Leader == "" || len(g.Voters) != 3 {
				return false
			}
		}
		return true
	})
	const parts = 12
	e2e.CreateTopic(t, ctx, c.Nodes[1], "dg", parts, nil)
	ps := e2e.NewProducers(4)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() { defer wg.Done(); ps.Run(ctx, t, c.Nodes[i%2].Listen, "dg", i, stop) }()
	}
	ps.WaitAcks(t, ctx, "acks before the kill", 400)
	victim := c.Nodes[2]
	victim.Kill()
	// Past each group's trailing logs and snapshot threshold (six
	// groups, four records a call).
	ps.WaitAcks(t, ctx, "acks with n3 down", 1500)
	victim.Launch(c.Nodes[0].Listen)
	ps.WaitAcks(t, ctx, "acks with n3 back", 400)
	close(stop)
	wg.Wait()
	acks, attempted, calls, failed := ps.Results()
	waitGroupsConverged(t, ctx, c, 6)
	// Every node holds the same records once its replicas caught up.
	e2e.WaitFor(t, ctx, "every node holds every acknowledged record", sameOnEveryNode(ctx, c, "dg", parts))
	c.CheckEveryNode(ctx, "dg", parts, acks, attempted)
	logs, err := os.ReadFile(victim.Logs.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`group=\d+ .*snapshot restored|snapshot restored.* group=\d+`).Match(logs) {
		t.Errorf("n3 caught up without installing a data group's snapshot; its log:\n%s", e2e.Tail(string(logs), 40))
	}
	t.Logf("%d calls (%d failed or unknown), %d records acknowledged", calls, failed, len(acks))
}

// TestClusterDataGroupsKafka: a 3-node cluster with data groups, seen
// from kgo (an idempotent producer, its defaults): Metadata names each
// partition's data-group leader, so the partitions have different
// leaders; kgo sends each node the produce requests of the partitions it
// leads, and every node answers produce requests directly (its
// logd_kafka_requests_total{api="Produce"} rises); every record is
// consumed back, once, at the offset it was acknowledged at. Consumer
// groups are kept in data groups, each coordinated by its home's leader
// (kafkaGroupsInDataGroups).
func TestClusterDataGroupsKafka(t *testing.T) {
	e2e.ParallelShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := &e2e.Cluster{T: t}
	kaddrs := map[string]string{}
	for i := range 3 {
		id := fmt.Sprintf("n%d", i+1)
		kaddrs[id] = e2e.FreeAddr(t)
		c.Nodes = append(c.Nodes, e2e.NewNode(t, id, "--kafka-listen", kaddrs[id], "--data-groups-per-node", "2"))
	}
	c.Start()
	e2e.WaitFor(t, ctx, "six data groups led by their preferred leaders", func() bool {
		st, err := clusterStatus(t, c.Nodes[0])
		if err != nil || len(st.DataGroups) != 6 {
			return false
		}
		for _, g := range st.DataGroups {
			if g.Leader != g.Replicas[0] || len(g.Voters) != 3 {
				return false
			}
		}
		return true
	})
	const parts = 12
	e2e.CreateTopic(t, ctx, c.Nodes[0], "kdg", parts, nil)
	if out := e2e.Logctl(t, c.Nodes[0], "topic", "describe", "kdg"); !regexp.MustCompile(`(?m)^PARTITION\s+GROUP\s+LEADER\s+LOG START`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^11\s+\d+\s+n\d\s+0\s+`).MatchString(out) {
		t.Errorf("topic describe does not show each partition's group and leader:\n%s", out)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(kaddrs["n2"]), kgo.DefaultProduceTopic("kdg"), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Metadata: each partition led by its group's leader.
	var leaders map[int32]int32
	e2e.WaitFor(t, ctx, "Metadata names the groups' leaders", func() bool {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("kdg")
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != parts {
			return false
		}
		leaders = map[int32]int32{}
		distinct := map[int32]bool{}
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 || p.Leader < 0 || len(p.Replicas) != 3 {
				return false
			}
			leaders[p.Partition] = p.Leader
			distinct[p.Leader] = true
		}
		return len(distinct) == 3
	})
	want := map[string]*kgo.Record{}
	var recs []*kgo.Record
	for i := range 600 {
		r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}
		recs = append(recs, r)
		want[string(r.Value)] = r
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// cluster status counts each group's partitions and the bytes of
	// their logs.
	e2e.WaitFor(t, ctx, "cluster status shows the groups' partitions and bytes", func() bool {
		st, err := clusterStatus(t, c.Nodes[0])
		if err != nil {
			return false
		}
		total := 0
		for _, g := range st.DataGroups {
			total += g.Partitions
			if g.Partitions > 0 && g.Bytes == 0 {
				return false
			}
		}
		return total == parts
	})
	for _, nd := range c.Nodes {
		if n := scrapeSeries(t, "http://"+nd.Listen+"/metrics")[`logd_kafka_requests_total{api="Produce"}`]; n == 0 {
			t.Errorf("%s answered no produce request (partition leaders %v)", nd.ID, leaders)
		}
	}
	// A consumer group (its state in the data group its name hashes to,
	// its commits bounded by each partition's end in its data group).
	consumer, err := kgo.NewClient(kgo.SeedBrokers(kaddrs["n3"]), kgo.ConsumeTopics("kdg"), kgo.ConsumerGroup("readers"),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	got := map[string]bool{}
	for len(got) < len(want) && ctx.Err() == nil {
		fs := consumer.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			w, ok := want[string(r.Value)]
			switch {
			case !ok || got[string(r.Value)]:
				t.Errorf("%q consumed unexpectedly or twice", r.Value)
			case w.Partition != r.Partition || w.Offset != r.Offset:
				t.Errorf("%q consumed at %d@%d, acknowledged at %d@%d", r.Value, r.Partition, r.Offset, w.Partition, w.Offset)
			}
			got[string(r.Value)] = true
		})
	}
	if len(got) != len(want) {
		t.Errorf("consumed %d of %d records", len(got), len(want))
	}
	// A commit that timed out or met a coordinator change (an election
	// on a loaded machine) is sent again, as a Kafka client would: the
	// same offsets, so a second write changes nothing.
	e2e.WaitFor(t, ctx, "the consumer's commit", func() bool {
		commitErr := consumer.CommitUncommittedOffsets(ctx)
		if commitErr != nil && !kerr.IsRetriable(commitErr) {
			t.Fatalf("commit: %v", commitErr)
		}
		return commitErr == nil
	})
	ends := map[int32]int64{}
	for _, r := range want {
		ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group = "readers"
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic = "kdg"
	for p := range int32(parts) {
		ft.Partitions = append(ft.Partitions, p)
	}
	fetch.Topics = append(fetch.Topics, ft)
	// Asked again while the answer is a retryable error (a coordinator
	// moving under load).
	var resp *kmsg.OffsetFetchResponse
	e2e.WaitFor(t, ctx, "the group's offsets", func() bool {
		resp, err = fetch.RequestWith(ctx, cl)
		if err == nil && resp.ErrorCode != 0 && kerr.IsRetriable(kerr.ErrorForCode(resp.ErrorCode)) {
			return false
		}
		return true
	})
	if err != nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 {
		t.Fatalf("offset fetch: %+v, %v", resp, err)
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 || p.Offset != ends[p.Partition] {
			t.Errorf("readers committed kdg-%d at %d (error %d), want its end %d", p.Partition, p.Offset, p.ErrorCode, ends[p.Partition])
		}
	}
	kafkaGroupsInDataGroups(t, ctx, c, kaddrs, ends)
}

// kafkaGroupsInDataGroups: Kafka consumer groups whose names hash to data
// groups led by two different nodes have those two nodes as their
// coordinators, whichever node FindCoordinator asks; a kgo group consumer
// of each, seeded at a node that does not coordinate it, consumes kdg and
// commits at its coordinator; another node answers the group's requests
// NOT_COORDINATOR, and each coordinator lists its own group only. The
// offsets are logd's: logctl describes them and moves them through a
// node that does not lead the group's home. A new share group's first
// heartbeat, sent to the leader of its name's data group, is handed to
// the share coordinator.
func kafkaGroupsInDataGroups(t *testing.T, ctx context.Context, c *e2e.Cluster, kaddrs map[string]string, ends map[int32]int64) {
	t.Helper()
	st, err := clusterStatus(t, c.Nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	var tab fsm.DataGroupTable
	leaderOf := map[uint64]string{}
	for _, g := range st.DataGroups {
		tab.Groups = append(tab.Groups, fsm.DataGroup{ID: g.ID})
		leaderOf[g.ID] = g.Leader
	}
	var names []string
	var coords []string
	for i := 0; len(names) < 2 && i < 1000; i++ {
		name := fmt.Sprintf("kreaders-%d", i)
		coord := leaderOf[fsm.HashedHome(name, tab)]
		if coord != "" && !slices.Contains(coords, coord) {
			names, coords = append(names, name), append(coords, coord)
		}
	}
	if len(names) != 2 {
		t.Fatalf("no two names hash to data groups led by two nodes: %v", leaderOf)
	}
	other := func(coord string) string {
		for id := range kaddrs {
			if id != coord {
				return id
			}
		}
		return ""
	}
	// A share group's first heartbeat, sent where FindCoordinator named
	// before the group existed (the leader of the data group its name
	// hashes to), reaches the share coordinator on the meta leader.
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("kshare-%d", i)
		at := leaderOf[fsm.HashedHome(name, tab)]
		if at == "" || at == st.LeaderID {
			continue
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(kaddrs[at]))
		if err != nil {
			t.Fatal(err)
		}
		hb := kmsg.NewPtrShareGroupHeartbeatRequest()
		hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = name, "share-member-1", []string{"kdg"}
		// Retried as a client retries: the coordinator's first
		// heartbeats may find the group's queue groups not made yet in
		// every data group (NOT_COORDINATOR).
		e2e.WaitFor(t, ctx, fmt.Sprintf("a new share group's heartbeat at %s, not the meta leader %s", at, st.LeaderID), func() bool {
			resp, err := hb.RequestWith(ctx, cl.SeedBrokers()[0])
			return err == nil && resp.ErrorCode == 0 && resp.MemberEpoch > 0
		})
		hb.MemberEpoch, hb.SubscribedTopicNames = -1, nil
		if resp, err := hb.RequestWith(ctx, cl.SeedBrokers()[0]); err != nil || resp.ErrorCode != 0 {
			t.Errorf("the share member's leave at %s: %+v, %v", at, resp, err)
		}
		cl.Close()
		break
	}
	for i, name := range names {
		for id, addr := range kaddrs {
			e2e.WaitFor(t, ctx, fmt.Sprintf("%s names %s's coordinator, %s", id, name, coords[i]), func() bool {
				cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
				if err != nil {
					return false
				}
				defer cl.Close()
				req := kmsg.NewPtrFindCoordinatorRequest()
				req.CoordinatorKey = name
				resp, err := req.RequestWith(ctx, cl)
				return err == nil && resp.ErrorCode == 0 && net.JoinHostPort(resp.Host, strconv.Itoa(int(resp.Port))) == kaddrs[coords[i]]
			})
		}
	}
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			consumer, err := kgo.NewClient(kgo.SeedBrokers(kaddrs[other(coords[i])]), kgo.ConsumeTopics("kdg"), kgo.ConsumerGroup(name),
				kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				t.Error(err)
				return
			}
			defer consumer.Close()
			got := 0
			for got < 600 && ctx.Err() == nil {
				got += consumer.PollFetches(ctx).NumRecords()
			}
			if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
				t.Errorf("%s: commit: %v", name, err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// fetchAt asks the node at addr for name's offsets of kdg: the
	// group's error code and each partition's offset.
	fetchAt := func(addr, name string) (int16, map[int32]int64, error) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			return 0, nil, err
		}
		defer cl.Close()
		var parts []int32
		for p := range int32(len(ends)) {
			parts = append(parts, p)
		}
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = name // versions below 8
		ft := kmsg.NewOffsetFetchRequestTopic()
		ft.Topic, ft.Partitions = "kdg", parts
		req.Topics = append(req.Topics, ft)
		rg := kmsg.NewOffsetFetchRequestGroup() // versions 8 and later
		rg.Group = name
		gt := kmsg.NewOffsetFetchRequestGroupTopic()
		gt.Topic, gt.Partitions = "kdg", parts
		rg.Topics = append(rg.Topics, gt)
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
		if err != nil {
			return 0, nil, err
		}
		offs := map[int32]int64{}
		if len(resp.Groups) == 1 {
			for _, t := range resp.Groups[0].Topics {
				for _, p := range t.Partitions {
					offs[p.Partition] = p.Offset
				}
			}
			return resp.Groups[0].ErrorCode, offs, nil
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				offs[p.Partition] = p.Offset
			}
		}
		return resp.ErrorCode, offs, nil
	}
	listAt := func(addr string) []string {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		resp, err := kmsg.NewPtrListGroupsRequest().RequestWith(ctx, cl.SeedBrokers()[0])
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, g := range resp.Groups {
			if strings.HasPrefix(g.Group, "kreaders-") {
				out = append(out, g.Group)
			}
		}
		return out
	}
	for i, name := range names {
		code, offs, err := fetchAt(kaddrs[coords[i]], name)
		if err != nil || code != 0 || len(offs) != len(ends) {
			t.Fatalf("%s: offset fetch at its coordinator %s: error code %d, %v, %v", name, coords[i], code, offs, err)
		}
		for p, off := range offs {
			if off != ends[p] {
				t.Errorf("%s committed kdg-%d at %d, want its end %d", name, p, off, ends[p])
			}
		}
		if code, _, err := fetchAt(kaddrs[other(coords[i])], name); err != nil || code != 16 { // NOT_COORDINATOR
			t.Errorf("%s: offset fetch at %s, not its coordinator: error code %d, %v", name, other(coords[i]), code, err)
		}
		if got := listAt(kaddrs[coords[i]]); !slices.Contains(got, name) || slices.Contains(got, names[1-i]) {
			t.Errorf("%s lists %v, want %s and not %s", coords[i], got, name, names[1-i])
		}
		// logd's own offsets: described and reset through a node that
		// does not lead the group's home.
		nd := c.Nodes[0]
		for _, n := range c.Nodes {
			if n.ID == other(coords[i]) {
				nd = n
			}
		}
		// nd's replica of the home serves what it applied: the
		// commits, soon.
		gc := groupClient(t, nd)
		e2e.WaitFor(t, ctx, name+" described through "+nd.ID, func() bool {
			d, err := gc.DescribeGroup(ctx, name)
			return err == nil && d.Home != 0 && len(d.Partitions) == len(ends)
		})
		if out := e2e.Logctl(t, nd, "group", "describe", name); !strings.Contains(out, "kdg") || !strings.Contains(out, "Home:") {
			t.Errorf("%s described through %s:\n%s", name, nd.ID, out)
		}
		e2e.Logctl(t, nd, "group", "reset-offsets", name, "--topic", "kdg", "--to-offset", "0", "--execute")
		e2e.WaitFor(t, ctx, name+"'s offsets reset at its coordinator", func() bool {
			code, offs, err := fetchAt(kaddrs[coords[i]], name)
			if err != nil || code != 0 || len(offs) != len(ends) {
				return false
			}
			for _, off := range offs {
				if off != 0 {
					return false
				}
			}
			return true
		})
	}
}

// TestClusterDataGroupsLeaderKill is TestClusterLeaderKill over data
// groups: producers write a 12-partition topic placed over six data
// groups through every node, while the node that leads the most groups is
// killed with SIGKILL and restarted, again and again; every acknowledged
// record is then read back from every node, once, at its offset.
func TestClusterDataGroupsLeaderKill(t *testing.T) {
	e2e.ParallelShort(t)
	kills, between := 3, 150
	if e2e.FaultLong() {
		kills, between = 10, 2000
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := e2e.NewCluster(t, 3, "--data-groups-per-node", "2", "--snapshot-threshold", "256", "--snapshot-interval", "200ms")
	// led counts the groups each node leads, as a running node sees them
	// (nil when none answers).
	led := func() map[string]int {
		st, ok := runningStatus(t, c)
		if !ok {
			return nil
		}
		out := map[string]int{}
		for _, g := range st.DataGroups {
			if g.Leader != "" {
				out[g.Leader]++
			}
		}
		return out
	}
	allLed := func() bool {
		n := 0
		for _, v := range led() {
			n += v
		}
		return n == 6
	}
	e2e.WaitFor(t, ctx, "six data groups led", allLed)
	const parts = 12
	e2e.CreateTopic(t, ctx, c.Nodes[1], "dgk", parts, nil)
	ps := e2e.NewProducers(5)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() { defer wg.Done(); ps.Run(ctx, t, c.Nodes[i%3].Listen, "dgk", i, stop) }()
	}
	for k := range kills {
		ps.WaitAcks(t, ctx, "acks before a kill", between)
		e2e.WaitFor(t, ctx, "every data group led before a kill", allLed)
		var victim *e2e.Node
		most := -1
		leads := led()
		for _, nd := range c.Nodes {
			if leads[nd.ID] > most {
				victim, most = nd, leads[nd.ID]
			}
		}
		victim.Kill()
		t.Logf("kill %d: SIGKILLed %s, which led %d data groups, at %d acks", k+1, victim.ID, most, ps.AckCount())
		ps.WaitAcks(t, ctx, "acks after a kill", between/2)
		other := c.Nodes[0]
		if other == victim {
			other = c.Nodes[1]
		}
		victim.Launch(other.Listen)
	}
	ps.WaitAcks(t, ctx, "final acks", between)
	close(stop)
	wg.Wait()
	acks, attempted, calls, failed := ps.Results()
	waitGroupsConverged(t, ctx, c, 6)
	e2e.WaitFor(t, ctx, "every node holds the same records", sameOnEveryNode(ctx, c, "dgk", parts))
	c.CheckEveryNode(ctx, "dgk", parts, acks, attempted)
	t.Logf("%d calls (%d failed or unknown), %d records acknowledged, %d kills", calls, failed, len(acks), kills)
}

// TestClusterDataGroupsFailover measures failover per partition (make
// fault): six processes, two data groups per node (twelve groups of
// three replicas), a 24-partition topic. Each node in turn is killed with
// SIGKILL; every partition whose group it led is then probed every 100 ms
// with a one-record produce through a surviving node (one attempt, the
// node's routing riding out the election), and the time from the kill to
// the partition's first acknowledged write is its failover. The median
// and the largest over partitions are logged (the goal: under 1 s and
// 1.5 s); nothing is asserted of them, the machine's load decides them.
func TestClusterDataGroupsFailover(t *testing.T) {
	if !e2e.FaultLong() {
		t.Skip("LOGD_FAULT_LONG=1 (make fault) measures failover over data groups")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := e2e.NewCluster(t, 6, "--data-groups-per-node", "2")
	status := func() (client.ClusterStatus, bool) { return runningStatus(t, c) }
	settled := func() bool {
		st, ok := status()
		if !ok || len(st.DataGroups) != 12 {
			return false
		}
		for _, g := range st.DataGroups {
			if g.Leader != g.Replicas[0] || len(g.Voters) != 3 {
				return false
			}
		}
		return true
	}
	e2e.WaitFor(t, ctx, "twelve data groups of three, led by their preferred leaders", settled)
	// Placement over six nodes that joined one by one: each node leads
	// two groups; the replicas, which lean to the first three as they
	// join (every group made before the fourth joined has its three
	// there), are moved toward an even spread by balancing.
	st, _ := status()
	held := map[string]int{}
	for _, g := range st.DataGroups {
		for _, r := range g.Replicas {
			held[r]++
		}
	}
	for _, n := range st.Nodes {
		if n.LeadsGroups != 2 {
			t.Errorf("%s leads %d data groups, want 2 (12 over 6)", n.ID, n.LeadsGroups)
		}
	}
	t.Logf("replicas held per node: %v", held)
	const parts = 24
	e2e.CreateTopic(t, ctx, c.Nodes[0], "fo", parts, nil)
	var all []time.Duration
	for k, victim := range c.Nodes {
		e2e.WaitFor(t, ctx, "groups back with their preferred leaders", settled)
		via := c.Nodes[(k+1)%len(c.Nodes)]
		cl, err := client.New(via.Listen, client.Options{Timeout: 5 * time.Second, Retry: client.RetryPolicy{MaxAttempts: 1}})
		if err != nil {
			t.Fatal(err)
		}
		var d client.TopicDescription
		e2e.WaitFor(t, ctx, via.ID+" knows the topic", func() bool {
			d, err = cl.DescribeTopic(ctx, "fo")
			return err == nil
		})
		// A node holds a third of the groups: the leaders come from every
		// member's report.
		st, _ := status()
		leaderOf := map[uint64]string{}
		for _, g := range st.DataGroups {
			leaderOf[g.ID] = g.Leader
		}
		var affected []int32
		for _, p := range d.Partitions {
			if leaderOf[p.DataGroup] == victim.ID {
				affected = append(affected, p.Partition)
			}
		}
		for _, p := range affected { // warm: the client knows the node
			if _, err := cl.Produce(ctx, "fo", []client.Record{{Partition: &p, Value: []byte("warm")}}); err != nil {
				t.Fatal(err)
			}
		}
		victim.Kill()
		start := time.Now()
		took := make([]time.Duration, len(affected))
		var wg sync.WaitGroup
		for i, p := range affected {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					if _, err := cl.Produce(ctx, "fo", []client.Record{{Partition: &p, Value: fmt.Appendf(nil, "k%d", k)}}); err == nil {
						took[i] = time.Since(start)
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}()
		}
		wg.Wait()
		cl.Close()
		slices.Sort(took)
		if len(took) > 0 {
			t.Logf("kill %d: %s led %d partitions; first acknowledged write after median %v, max %v", k+1, victim.ID, len(took),
				took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
		}
		all = append(all, took...)
		victim.Launch(via.Listen)
	}
	if len(all) < parts {
		t.Errorf("%d partitions measured over %d kills, want every one of %d (each led by one node)", len(all), len(c.Nodes), parts)
	}
	slices.Sort(all)
	if len(all) > 0 {
		t.Logf("failover per partition over %d kills of 6 nodes (%d partitions): median %v, max %v (goal: 1 s, 1.5 s)", len(c.Nodes), len(all),
			all[len(all)/2].Round(time.Millisecond), all[len(all)-1].Round(time.Millisecond))
	}
}

// waitGroupsConverged waits until every data group has a leader and every
// replica that answered has applied the group's commit index (lag 0), as
// a running node of c reports: then each node reads what it will keep
// reading, with no write in flight.
func waitGroupsConverged(t *testing.T, ctx context.Context, c *e2e.Cluster, groups int) {
	t.Helper()
	e2e.WaitFor(t, ctx, "every data group converged", func() bool {
		st, ok := runningStatus(t, c)
		if !ok || len(st.DataGroups) != groups {
			return false
		}
		for _, g := range st.DataGroups {
			if g.Leader == "" || g.Lag != 0 || len(g.Voters) != len(g.Replicas) {
				return false
			}
		}
		return true
	})
}

// runningStatus is logctl cluster status from the first running node of
// c that answers; false when none does.
func runningStatus(t *testing.T, c *e2e.Cluster) (client.ClusterStatus, bool) {
	t.Helper()
	for _, nd := range c.Nodes {
		if nd.Cmd != nil {
			if st, err := clusterStatus(t, nd); err == nil {
				return st, true
			}
		}
	}
	return client.ClusterStatus{}, false
}

// sameOnEveryNode reports whether every node of c reads the same records
// of topic's parts partitions (a read that fails counts as not yet).
func sameOnEveryNode(ctx context.Context, c *e2e.Cluster, topic string, parts int32) func() bool {
	return func() bool {
		var first string
		for i, nd := range c.Nodes {
			got, err := nd.TryReadAll(ctx, topic, parts)
			if err != nil {
				return false
			}
			if r := e2e.Render(got); i == 0 {
				first = r
			} else if r != first {
				return false
			}
		}
		return true
	}
}

// TestClusterDataGroupsElastic: three processes with six data groups
// under steady produce through every node. A fourth node joins and takes
// its share: replicas move to it one at a time until every node holds
// within two of the others, each group's voters its replicas. n2 is
// drained (it holds no replica while it serves) and undrained (it takes
// its share again). Then the fourth is killed for good: past --dead-node-timeout its replicas are
// rebuilt on the other three, every group back at three voters. Then a
// second node is killed: every group keeps a majority, and every
// acknowledged record is read back from the two that remain.
func TestClusterDataGroupsElastic(t *testing.T) {
	e2e.ParallelShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{"--data-groups-per-node", "2", "--dead-node-timeout", "3s"}
	c := e2e.NewCluster(t, 3, args...)
	waitGroupsConverged(t, ctx, c, 6)
	const parts = 12
	e2e.CreateTopic(t, ctx, c.Nodes[0], "el", parts, nil)
	ps := e2e.NewProducers(5)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); ps.Run(ctx, t, c.Nodes[i%2].Listen, "el", i, stop) }()
	}
	ps.WaitAcks(t, ctx, "acks before the join", 100)

	// settled reports whether the groups' voters are their replicas,
	// with the replicas of the nodes named spread within two.
	settled := func(groups int, nodes ...string) func() bool {
		return func() bool {
			st, ok := runningStatus(t, c)
			if !ok || len(st.DataGroups) != groups {
				return false
			}
			held := map[string]int{}
			for _, g := range st.DataGroups {
				v, r := slices.Sorted(slices.Values(g.Voters)), slices.Sorted(slices.Values(g.Replicas))
				if g.Leader == "" || !slices.Equal(v, r) {
					return false
				}
				for _, id := range g.Replicas {
					if !slices.Contains(nodes, id) {
						return false
					}
					held[id]++
				}
			}
			lo, hi := groups*3, 0
			for _, id := range nodes {
				lo, hi = min(lo, held[id]), max(hi, held[id])
			}
			return hi-lo <= 2 && lo > 0
		}
	}
	n4 := e2e.NewNode(t, "n4", args...)
	c.Nodes = append(c.Nodes, n4)
	joined := time.Now()
	n4.Launch(c.Nodes[0].Listen)
	e2e.WaitFor(t, ctx, "n4 takes its share of the eight groups", settled(8, "n1", "n2", "n3", "n4"))
	balanced := time.Since(joined)
	ps.WaitAcks(t, ctx, "acks after the balance", 100)

	// Drained (through a follower, which forwards it), n2 keeps serving
	// and holds nothing; undone, it takes its share again. While it
	// drains, a follower (n3) lists the moves, the drain as their reason;
	// once done, none.
	admin, err := client.New(c.Nodes[2].Listen, client.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if out := e2e.Logctl(t, c.Nodes[2], "cluster", "drain", "n2"); !strings.Contains(out, "draining n2") {
		t.Errorf("logctl cluster drain: %q", out)
	}
	drainMoves, shown := 0, false
	e2e.WaitFor(t, ctx, "n2 drained", func() bool {
		mv, err := admin.ListMoves(ctx)
		if err != nil {
			t.Fatalf("list moves: %v", err)
		}
		for _, m := range mv.Moves {
			if m.Reason == "node n2 drained" && slices.Equal(m.Removed, []string{"n2"}) {
				drainMoves++
			}
		}
		if len(mv.Moves) > 0 && !shown {
			shown = true
			t.Logf("logctl cluster moves while n2 drains:\n%s", e2e.Logctl(t, c.Nodes[2], "cluster", "moves"))
		}
		return settled(8, "n1", "n3", "n4")()
	})
	if drainMoves == 0 {
		t.Errorf("no move of the drain of n2 listed while it drained")
	}
	e2e.WaitFor(t, ctx, "the drain's moves cleared", func() bool {
		return strings.TrimSpace(e2e.Logctl(t, c.Nodes[2], "cluster", "moves")) == "no replica moves in progress"
	})
	ps.WaitAcks(t, ctx, "acks while n2 is drained", 50)
	e2e.Logctl(t, c.Nodes[2], "cluster", "drain", "n2", "--undo")
	planned := false
	e2e.WaitFor(t, ctx, "n2 takes its share again", func() bool {
		if out := e2e.Logctl(t, c.Nodes[2], "cluster", "balance", "--dry-run"); !planned && strings.Contains(out, "\nSTEP ") {
			planned = true
			t.Logf("logctl cluster balance --dry-run while n2 takes its share:\n%s", out)
		}
		return settled(8, "n1", "n2", "n3", "n4")()
	})
	e2e.WaitFor(t, ctx, "balanced, as the plan says", func() bool {
		return strings.HasPrefix(e2e.Logctl(t, c.Nodes[2], "cluster", "balance", "--dry-run"), "balanced: no replica moves (8 data groups over 4 nodes)")
	})

	killed := time.Now()
	n4.Kill()
	e2e.WaitFor(t, ctx, "n4's replicas rebuilt on n1, n2 and n3", settled(8, "n1", "n2", "n3"))
	healed := time.Since(killed)
	ps.WaitAcks(t, ctx, "acks after the heal", 100)
	// A node the groups still place replicas on is not removed without
	// --force; n4, which holds none now, is.
	if err := admin.RemoveNode(ctx, "n3"); connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "drain it first") {
		t.Fatalf("removing n3, which holds replicas: %v; want FAILED_PRECONDITION saying to drain it first", err)
	}
	if err := admin.RemoveNode(ctx, "n4"); err != nil {
		t.Fatalf("removing n4, which holds no replica: %v", err)
	}
	c.Nodes = c.Nodes[:3]

	c.Nodes[2].Kill()
	ps.WaitAcks(t, ctx, "acks with two nodes of three", 100)
	close(stop)
	wg.Wait()
	acks, attempted, calls, failed := ps.Results()
	live := &e2e.Cluster{T: t, Nodes: c.Nodes[:2]}
	e2e.WaitFor(t, ctx, "n1 and n2 hold the same records", sameOnEveryNode(ctx, live, "el", parts))
	live.CheckEveryNode(ctx, "el", parts, acks, attempted)
	t.Logf("%d calls (%d failed or unknown), %d records acknowledged; n4 balanced in %v, its replicas rebuilt %v after its kill (dead-node timeout 3s)",
		calls, failed, len(acks), balanced.Round(time.Millisecond), healed.Round(time.Millisecond))
}
