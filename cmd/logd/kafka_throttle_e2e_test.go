package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
)

// TestKafkaThrottleRetry: each Kafka client (kgo, sarama, kafkajs, kcat)
// produces into a topic whose queue group's backlog bound is full, so
// admission control refuses its produce requests with
// NOT_ENOUGH_REPLICAS and a throttle_time_ms (docs/kafka.md, "Errors");
// once the client was refused and came back at least once, the test raises
// the bound, and the client's records all go in: logd's own client then
// reads each of them exactly once, by value, and nothing else but the
// records that filled the backlog.
func TestKafkaThrottleRetry(t *testing.T) {
	// A client batches up to n records for a partition: an append larger
	// than the bound could never fit and is refused outright, so the bound
	// is above n.
	const bound, n = 40, 30
	kaddr := e2e.FreeAddr(t)
	nd := e2e.StartNode(t, "--kafka-listen", kaddr)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := client.New(nd.Listen, client.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	values := func(prefix string) []string {
		vs := make([]string, n)
		for i := range vs {
			vs[i] = fmt.Sprintf("%s-%05d", prefix, i)
		}
		return vs
	}
	for _, tc := range []struct {
		name string
		// tool finds the client's program (it skips the test without
		// one); nil for the Go clients.
		tool func(*testing.T) string
		// produce sends the records and returns their values once the
		// client says they are all written; it runs on its own goroutine.
		produce func(ctx context.Context, topic, bin string) ([]string, error)
	}{
		{name: "kgo", produce: func(ctx context.Context, topic, bin string) ([]string, error) {
			// Records are retried until their context ends (kgo's
			// default). kgo retries NOT_ENOUGH_REPLICAS after a metadata
			// refresh, at most one per MetadataMinAge (5 s by default):
			// short here.
			cl, err := kgo.NewClient(kgo.SeedBrokers(kaddr), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
				kgo.MetadataMinAge(200*time.Millisecond))
			if err != nil {
				return nil, err
			}
			defer cl.Close()
			vs := values("kgo")
			var rs []*kgo.Record
			for i, v := range vs {
				rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte(v)})
			}
			return vs, cl.ProduceSync(ctx, rs...).FirstErr()
		}},
		{name: "sarama", produce: func(ctx context.Context, topic, bin string) ([]string, error) {
			// sarama's default of 3 retries, each after the throttle,
			// gives up within seconds: a producer that should ride out
			// admission control raises it.
			cfg := saramaConfig()
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			cfg.Producer.Retry.Max = 100
			p, err := sarama.NewSyncProducer([]string{kaddr}, cfg)
			if err != nil {
				return nil, err
			}
			defer p.Close()
			vs := values("sarama")
			for i := 0; i < n; i += 10 {
				var msgs []*sarama.ProducerMessage
				for _, v := range vs[i:min(i+10, n)] {
					msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(v), Value: sarama.StringEncoder(v)})
				}
				if err := p.SendMessages(msgs); err != nil {
					return nil, err
				}
			}
			return vs, nil
		}},
		{name: "kafkajs", tool: kafkajsNode, produce: func(ctx context.Context, topic, bin string) ([]string, error) {
			var out struct {
				Sends []struct{ Count int } `json:"sends"`
			}
			err := execKafkajs(ctx, bin, "produce", map[string]any{"broker": kaddr, "topic": topic, "count": n, "perSend": 10, "retries": 30}, &out)
			vs := make([]string, n)
			for i := range vs {
				vs[i] = string(kafkajsRecord(i).Value)
			}
			return vs, err
		}},
		{name: "kcat", tool: kcat, produce: func(ctx context.Context, topic, bin string) ([]string, error) {
			vs := values("kcat")
			file := filepath.Join(t.TempDir(), "records.txt")
			if err := os.WriteFile(file, []byte(strings.Join(vs, "\n")+"\n"), 0o644); err != nil {
				return nil, err
			}
			// librdkafka's defaults: a message is retried until
			// message.timeout.ms (5 minutes).
			out, err := exec.CommandContext(ctx, bin, "-b", kaddr, "-P", "-t", topic, "-l", file).CombinedOutput()
			if err != nil {
				return nil, fmt.Errorf("kcat -P: %v\n%s", err, out)
			}
			return vs, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var bin string
			if tc.tool != nil {
				bin = tc.tool(t)
			}
			topic := "throttle-" + tc.name
			// One partition, so one data group: a request spanning
			// groups may be refused for one group's partitions and
			// written for the others', and kafkajs, which sends the
			// whole request again, would write those twice
			// (docs/kafka.md, "Retrying a refused produce").
			if _, err := c.CreateTopic(ctx, topic, 1, map[string]string{"queue.max.backlog.records": strconv.Itoa(bound)}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.CreateQueueGroup(ctx, topic, "workers", client.QueueGroupConfig{}, false); err != nil {
				t.Fatal(err)
			}
			fill := make([]client.Record, bound)
			for i := range fill {
				fill[i].Value = fmt.Appendf(nil, "fill-%02d", i)
			}
			if _, err := c.Produce(ctx, topic, fill); err != nil {
				t.Fatalf("fill the backlog: %v", err)
			}
			refused := func() float64 {
				v, _ := metric(t, nd, "logd_kafka_request_errors_total", `api="Produce"`, `error="NOT_ENOUGH_REPLICAS"`)
				return v
			}
			before := refused()
			type result struct {
				values []string
				err    error
			}
			done := make(chan result, 1)
			start := time.Now()
			go func() {
				vs, err := tc.produce(ctx, topic, bin)
				done <- result{vs, err}
			}()
			// Refused, and retried after the throttle: two refusals.
			e2e.WaitFor(t, ctx, "the client refused twice", func() bool {
				select {
				case r := <-done:
					done <- r
					return true
				default:
				}
				return refused() >= before+2
			})
			if got := refused(); got < before+2 {
				r := <-done
				t.Fatalf("the client ended (err %v) after %v refusals", r.err, got-before)
			}
			refusedFor := time.Since(start)
			if _, err := c.AlterTopic(ctx, topic, map[string]string{"queue.max.backlog.records": "100000"}, nil); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil {
				t.Fatalf("%s produce after the bound cleared: %v", tc.name, r.err)
			}
			t.Logf("%s: refused %v times for %v, then %d records in %v (under shared load)", tc.name, refused()-before,
				refusedFor.Round(time.Millisecond), n, (time.Since(start) - refusedFor).Round(time.Millisecond))
			got := readByValue(t, ctx, nd, topic) // fails on a value read twice
			for _, v := range r.values {
				if _, ok := got[v]; !ok {
					t.Errorf("%s: acknowledged, never read", v)
				}
				delete(got, v)
			}
			for v := range got {
				if !strings.HasPrefix(v, "fill-") {
					t.Errorf("%s: read, never produced", v)
				}
			}
			if len(got) != bound {
				t.Errorf("%d fill records read, want %d", len(got), bound)
			}
		})
	}
}
