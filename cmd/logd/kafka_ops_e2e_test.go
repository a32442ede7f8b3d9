package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logd-dev/logd/api/logdv1"
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
	kaddr := freeAddr(t)
	nd := startNode(t, "--kafka-listen", kaddr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	createTopic(t, ctx, nd, "traffic", 2, nil)

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

	url := "http://" + nd.listen + "/metrics"
	series := func(family, direction string) float64 {
		return scrapeSeries(t, url)[fmt.Sprintf(`%s{direction=%q,topic="traffic"}`, family, direction)]
	}
	if in := series("logd_topic_records_total", "in"); in != n {
		t.Fatalf("logd_topic_records_total in: %v after %d records produced by kgo", in, n)
	}
	// kgo may fetch a batch again (a fetch it abandoned), never fewer.
	waitFor(t, ctx, "the fetched records counted", func() bool { return series("logd_topic_records_total", "out") >= n })
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
	if _, err := nd.rpc.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "traffic", Records: apiRecs})); err != nil {
		t.Fatal(err)
	}
	if in := series("logd_topic_records_total", "in"); in != n+viaAPI {
		t.Fatalf("logd_topic_records_total in: %v after %d records by kgo and %d through the Connect API", in, n, viaAPI)
	}
}
