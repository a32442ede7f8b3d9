package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
)

// saramaConfig is sarama's configuration for the tests: its defaults
// (protocol version 2.8, the hash partitioner, auto-creation asked for),
// a client id, and quick retries.
func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "logd-sarama-e2e"
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Metadata.Retry.Max = 3
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	cfg.Producer.Retry.Max = 3
	cfg.Producer.Retry.Backoff = 100 * time.Millisecond
	cfg.Producer.Return.Successes = true
	return cfg
}

// saramaMessage is record i of a sarama produce with the given prefix.
func saramaMessage(topic, prefix string, i int) *sarama.ProducerMessage {
	return &sarama.ProducerMessage{
		Topic: topic,
		Key:   sarama.StringEncoder(fmt.Sprintf("key-%d", i%31)),
		Value: sarama.StringEncoder(fmt.Sprintf("%s-%05d", prefix, i)),
		Headers: []sarama.RecordHeader{
			{Key: []byte("seq"), Value: []byte(strconv.Itoa(i))},
			{Key: []byte("origin"), Value: []byte("sarama")},
		},
	}
}

// TestKafkaSarama runs IBM/sarama against the built logd, with topic
// auto-creation off: a SyncProducer with acks=1 (WaitForLocal), and one
// with acks=-1 (WaitForAll) once per compression codec, write keyed
// records with headers across three partitions; logd's Go client reads
// every one back once, with its key and headers, at the partition and
// offset sarama was told; sarama's partition consumer (which checks each
// batch's CRC) reads them all back too; its cluster admin creates a topic
// with a setting, describes and alters the setting, and deletes the
// topic, as logd's client sees; and a produce to a missing topic,
// whose Metadata asks for auto-creation, is refused with
// UNKNOWN_TOPIC_OR_PARTITION and creates nothing.
func TestKafkaSarama(t *testing.T) {
	const parts = 3
	kaddr := e2e.FreeAddr(t)
	nd := e2e.StartNode(t, "--kafka-listen", kaddr, "--kafka-auto-create-topics=false")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e2e.CreateTopic(t, ctx, nd, "sarama", parts, nil)

	// Every message sarama acknowledged, by value.
	acked := map[string]*sarama.ProducerMessage{}
	produce := func(t *testing.T, acks sarama.RequiredAcks, codec sarama.CompressionCodec, prefix string, n int) {
		t.Helper()
		cfg := saramaConfig()
		cfg.Producer.RequiredAcks = acks
		cfg.Producer.Compression = codec
		p, err := sarama.NewSyncProducer([]string{kaddr}, cfg)
		if err != nil {
			t.Fatalf("sarama producer: %v", err)
		}
		defer p.Close()
		start := time.Now()
		for i := 0; i < n; i += 25 {
			var msgs []*sarama.ProducerMessage
			for j := i; j < min(i+25, n); j++ {
				msgs = append(msgs, saramaMessage("sarama", prefix, j))
			}
			if err := p.SendMessages(msgs); err != nil {
				t.Fatalf("sarama SendMessages (acks %d, %v): %v", acks, codec, err)
			}
			for _, m := range msgs {
				v, _ := m.Value.Encode()
				acked[string(v)] = m
			}
		}
		t.Logf("sarama acks %d %v: %d records in %v (under shared load)", acks, codec, n, time.Since(start).Round(time.Millisecond))
	}

	t.Run("acks=1", func(t *testing.T) {
		produce(t, sarama.WaitForLocal, sarama.CompressionNone, "local", 200)
	})
	t.Run("acks=-1", func(t *testing.T) {
		for _, codec := range []sarama.CompressionCodec{sarama.CompressionNone, sarama.CompressionGZIP, sarama.CompressionSnappy, sarama.CompressionLZ4, sarama.CompressionZSTD} {
			produce(t, sarama.WaitForAll, codec, "all-"+codec.String(), 60)
		}
	})

	t.Run("read by logd's client", func(t *testing.T) {
		got := readByValue(t, ctx, nd, "sarama")
		if len(got) != len(acked) {
			t.Fatalf("logd's client read %d records, sarama acknowledged %d", len(got), len(acked))
		}
		perPart := map[int32]int{}
		for v, m := range acked {
			r, ok := got[v]
			if !ok {
				t.Fatalf("%s: acknowledged to sarama, not read by logd's client", v)
			}
			key, _ := m.Key.Encode()
			want := []client.Header{{Key: "seq", Value: m.Headers[0].Value}, {Key: "origin", Value: []byte("sarama")}}
			if !bytes.Equal(r.Key, key) || !sameHeaders(r.Headers, want) {
				t.Fatalf("%s: key %q headers %v, want key %q headers %v", v, r.Key, r.Headers, key, want)
			}
			if r.Partition != m.Partition || r.Offset != m.Offset {
				t.Fatalf("%s: read at %d/%d, sarama was told %d/%d", v, r.Partition, r.Offset, m.Partition, m.Offset)
			}
			perPart[r.Partition]++
		}
		if len(perPart) != parts {
			t.Fatalf("records landed in %d partitions of %d: %v", len(perPart), parts, perPart)
		}
	})

	t.Run("partition consumer", func(t *testing.T) {
		cfg := saramaConfig()
		cfg.Consumer.Return.Errors = true
		cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
		cons, err := sarama.NewConsumer([]string{kaddr}, cfg)
		if err != nil {
			t.Fatalf("sarama consumer: %v", err)
		}
		defer cons.Close()
		ends := map[int32]int64{}
		for _, m := range acked {
			ends[m.Partition] = max(ends[m.Partition], m.Offset+1)
		}
		seen := map[string]bool{}
		for part := range int32(parts) {
			pc, err := cons.ConsumePartition("sarama", part, sarama.OffsetOldest)
			if err != nil {
				t.Fatalf("sarama ConsumePartition %d: %v", part, err)
			}
			next := int64(0)
			for next < ends[part] {
				select {
				case m := <-pc.Messages():
					if m.Offset != next {
						t.Fatalf("sarama read offset %d of partition %d, want %d", m.Offset, part, next)
					}
					a, ok := acked[string(m.Value)]
					if !ok || a.Partition != part || seen[string(m.Value)] {
						t.Fatalf("sarama read %q at %d/%d: acknowledged %v, read before %v", m.Value, part, m.Offset, ok, seen[string(m.Value)])
					}
					seen[string(m.Value)] = true
					if len(m.Headers) != 2 || string(m.Headers[1].Value) != "sarama" {
						t.Fatalf("sarama read %q with headers %v", m.Value, m.Headers)
					}
					next++
				case err := <-pc.Errors():
					t.Fatalf("sarama consuming partition %d: %v", part, err)
				case <-ctx.Done():
					t.Fatalf("sarama read partition %d to %d of %d: %v", part, next, ends[part], ctx.Err())
				}
			}
			if hwm := pc.HighWaterMarkOffset(); hwm != ends[part] {
				t.Errorf("partition %d: sarama's high watermark %d, want %d", part, hwm, ends[part])
			}
			pc.Close()
		}
		if len(seen) != len(acked) {
			t.Fatalf("sarama read %d of %d records", len(seen), len(acked))
		}
	})

	t.Run("admin", func(t *testing.T) {
		a, err := sarama.NewClusterAdmin([]string{kaddr}, saramaConfig())
		if err != nil {
			t.Fatalf("sarama cluster admin: %v", err)
		}
		defer a.Close()
		c, err := client.New(nd.Listen, client.Options{Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		str := func(s string) *string { return &s }
		retention := func(want string) {
			t.Helper()
			//lint:ignore SA1019 sarama clients still call DescribeConfig, a wrapper that sends the same DescribeConfigs request
			entries, err := a.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: "saradmin", ConfigNames: []string{"retention.ms"}})
			if err != nil || len(entries) != 1 || entries[0].Value != want || entries[0].Source != sarama.SourceTopic {
				t.Fatalf("sarama DescribeConfig of saradmin: %+v, %v; want retention.ms %s set on the topic", entries, err, want)
			}
			d, err := c.DescribeTopic(ctx, "saradmin")
			if err != nil {
				t.Fatal(err)
			}
			if d.Topic.Config["retention.ms"] != want {
				t.Fatalf("saradmin's retention.ms is %q in logd, sarama set %s", d.Topic.Config["retention.ms"], want)
			}
		}

		if err := a.CreateTopic("saradmin", &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1, ConfigEntries: map[string]*string{"retention.ms": str("7200000")}}, false); err != nil {
			t.Fatalf("sarama CreateTopic: %v", err)
		}
		if err := a.CreateTopic("saradmin", &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, false); !errors.Is(err, sarama.ErrTopicAlreadyExists) {
			t.Fatalf("sarama CreateTopic of an existing topic: %v, want %v", err, sarama.ErrTopicAlreadyExists)
		}
		topics, err := a.ListTopics()
		if err != nil || topics["saradmin"].NumPartitions != 2 {
			t.Fatalf("sarama ListTopics: %v; saradmin %+v, want 2 partitions", err, topics["saradmin"])
		}
		retention("7200000")
		if err := a.IncrementalAlterConfig(sarama.TopicResource, "saradmin", map[string]sarama.IncrementalAlterConfigsEntry{
			"retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: str("3600000")},
		}, false); err != nil {
			t.Fatalf("sarama IncrementalAlterConfig: %v", err)
		}
		retention("3600000")
		if err := a.DeleteTopic("saradmin"); err != nil {
			t.Fatalf("sarama DeleteTopic: %v", err)
		}
		if _, err := c.DescribeTopic(ctx, "saradmin"); !errors.Is(err, client.ErrUnknownTopic) {
			t.Fatalf("logd's client after sarama DeleteTopic: %v, want %v", err, client.ErrUnknownTopic)
		}
		if err := a.DeleteTopic("saradmin"); !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			t.Fatalf("sarama DeleteTopic of a deleted topic: %v, want %v", err, sarama.ErrUnknownTopicOrPartition)
		}
	})

	t.Run("auto-create refused", func(t *testing.T) {
		p, err := sarama.NewSyncProducer([]string{kaddr}, saramaConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		_, _, err = p.SendMessage(saramaMessage("sarama-missing", "nowhere", 0))
		if !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			t.Fatalf("sarama produce to a missing topic: %v, want %v", err, sarama.ErrUnknownTopicOrPartition)
		}
		c, err := client.New(nd.Listen, client.Options{Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ts, err := c.ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(ts, func(tp client.Topic) bool { return tp.Name == "sarama-missing" }) {
			t.Fatal("a sarama produce created sarama-missing with auto-creation off")
		}
	})
}
