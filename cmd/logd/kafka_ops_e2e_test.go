package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
)

// scrapeSeries reads every sample of a Prometheus text page, keyed by its
// series as printed (name{label="value",...}, labels in name order).
func scrapeSeries(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z_]+(?:\{[^}]*\})?) (\S+)$`).FindAllStringSubmatch(string(body), -1) {
		if v, err := strconv.ParseFloat(m[2], 64); err == nil {
			out[m[1]] = v
		}
	}
	return out
}

// TestKafkaTopicTraffic: records produced and consumed through the Kafka
// listener (kgo) move the per-topic series the Connect API counts into,
// logd_topic_records_total and logd_topic_bytes_total, on the node's one
// /metrics page, and a Connect produce adds to the same series.
func TestKafkaTopicTraffic(t *testing.T) {
	const n, viaAPI = 50, 7
	kaddr := e2e.FreeAddr(t)
	nd := e2e.StartNode(t, "--kafka-listen", kaddr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e2e.CreateTopic(t, ctx, nd, "traffic", 2, nil)

	cl, err := kgo.NewClient(kgo.SeedBrokers(kaddr), kgo.DefaultProduceTopic("traffic"),
		kgo.ConsumeTopics("traffic"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "traffic-%03d", i)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("kgo produce: %v", err)
	}
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("kgo consumed %d of %d records: %v", got, n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("kgo fetch %s-%d: %v", topic, p, err) })
		got += fs.NumRecords()
	}

	url := "http://" + nd.Listen + "/metrics"
	series := func(family, direction string) float64 {
		return scrapeSeries(t, url)[fmt.Sprintf(`%s{direction=%q,topic="traffic"}`, family, direction)]
	}
	if in := series("logd_topic_records_total", "in"); in != n {
		t.Fatalf("logd_topic_records_total in: %v after %d records produced by kgo", in, n)
	}
	// kgo may fetch a batch again (a fetch it abandoned), never fewer.
	e2e.WaitFor(t, ctx, "the fetched records counted", func() bool { return series("logd_topic_records_total", "out") >= n })
	// Batch bytes: kgo compresses (snappy) by default, so the records'
	// own bytes bound nothing; what was served was at least what came in.
	kafkaIn, kafkaOut := series("logd_topic_bytes_total", "in"), series("logd_topic_bytes_total", "out")
	if kafkaIn <= 0 || kafkaOut < kafkaIn {
		t.Fatalf("logd_topic_bytes_total: in %v, out %v; want in above 0, out at least in", kafkaIn, kafkaOut)
	}

	// The Connect API counts into the same series.
	var apiRecs []*logdv1.Record
	for i := range viaAPI {
		apiRecs = append(apiRecs, &logdv1.Record{Value: fmt.Appendf(nil, "api-%d", i)})
	}
	if _, err := nd.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "traffic", Records: apiRecs})); err != nil {
		t.Fatal(err)
	}
	if in := series("logd_topic_records_total", "in"); in != n+viaAPI {
		t.Fatalf("logd_topic_records_total in: %v after %d records by kgo and %d through the Connect API", in, n, viaAPI)
	}
}

// TestKafkaGroupDescribeMembers: logctl group describe shows a group's
// Kafka members (protocol kafka, client id, host, assigned partitions),
// which live in the leader's Kafka group coordinator only, with its
// generation and rebalances, in its
// members table and in -o json, with the partitions' owners, through the
// leader and through a follower (which asks the leader for them); once
// the member leaves, the group has none.
func TestKafkaGroupDescribeMembers(t *testing.T) {
	c := &e2e.Cluster{T: t}
	var seeds []string
	for i := range 3 {
		kaddr := e2e.FreeAddr(t)
		seeds = append(seeds, kaddr)
		c.Nodes = append(c.Nodes, e2e.NewNode(t, fmt.Sprintf("n%d", i+1), kafkaGroupArgs(kaddr)...))
	}
	c.Start()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leader := c.Leader(ctx)
	follower := c.Nodes[0]
	if follower == leader {
		follower = c.Nodes[1]
	}
	e2e.CreateTopic(t, ctx, leader, "described", 2, nil)

	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID("kops-describe"), kgo.ConsumerGroup("kd"),
		kgo.ConsumeTopics("described"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic("described"))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			cl.Close()
		}
	}()
	recs := make([]*kgo.Record, 20)
	for i := range recs {
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "d-%d", i)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("kgo produce: %v", err)
	}
	for got := 0; got < len(recs); {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("kgo consumed %d of %d records: %v", got, len(recs), err)
		}
		got += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	c.Converge(ctx) // the follower has the commits too

	describe := func(nd *e2e.Node) client.GroupDescription {
		t.Helper()
		var d client.GroupDescription
		if err := json.Unmarshal([]byte(e2e.Logctl(t, nd, "group", "describe", "kd", "-o", "json")), &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, nd := range []*e2e.Node{leader, follower} {
		// Kafka membership lives with the coordinator, the leader of the
		// group's home, and is not replicated: when that leadership moves
		// (to its preferred leader, say), the client joins the new
		// coordinator on its next heartbeat (docs/kafka.md), and holds
		// its partitions again once that rebalance ends.
		var d client.GroupDescription
		e2e.WaitFor(t, ctx, "the kgo member, assigned, in a describe through "+nd.ID, func() bool {
			d = describe(nd)
			return len(d.Members) == 1 && len(d.Members[0].Partitions) > 0 && d.State == "stable"
		})
		if len(d.Members) != 1 {
			t.Fatalf("describe -o json through %s: %d members, want the kgo member: %+v", nd.ID, len(d.Members), d)
		}
		m := d.Members[0]
		if m.Protocol != "kafka" || m.ClientID != "kops-describe" || !strings.HasPrefix(m.ClientHost, "127.0.0.1") || m.ID == "" ||
			len(m.Partitions) != 2 || !slices.Equal(m.Topics, []string{"described"}) {
			t.Fatalf("Kafka member through %s: %+v; want protocol kafka, client id kops-describe, host 127.0.0.1, topic described, both partitions", nd.ID, m)
		}
		if d.State != "stable" || len(d.Partitions) != 2 {
			t.Fatalf("through %s: group state %q with %d partitions; want stable with both", nd.ID, d.State, len(d.Partitions))
		}
		// The Kafka coordinator's generations, not the replicated group's.
		if d.Generation < 1 || d.Rebalances < 1 {
			t.Fatalf("through %s: generation %d, rebalances %d; want the coordinator's (at least 1 each)", nd.ID, d.Generation, d.Rebalances)
		}
		for _, p := range d.Partitions {
			if p.Owner != m.ID || p.Committed != p.End {
				t.Fatalf("through %s: partition %d: owner %q, committed %d of %d; want the member's, at the end", nd.ID, p.Partition, p.Owner, p.Committed, p.End)
			}
		}
		text := e2e.Logctl(t, nd, "group", "describe", "kd")
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(m.ID) + `\s+described\s+described:0,described:1\s+-\s+-\s+-\s+kafka\s+kops-describe\s+127\.0\.0\.1\S*$`).MatchString(text) {
			t.Fatalf("through %s: the members table lacks the Kafka member:\n%s", nd.ID, text)
		}
	}

	cl.Close() // leaves the group
	closed = true
	for _, nd := range []*e2e.Node{leader, follower} {
		e2e.WaitFor(t, ctx, "the member gone from describe through "+nd.ID, func() bool {
			d := describe(nd)
			return len(d.Members) == 0 && d.State == "empty"
		})
	}
}
