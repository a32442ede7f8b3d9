package kafka

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/server"
)

// belowCompression is a backend whose cluster has a member whose build
// does not read snappy, lz4 and zstd at apply yet (below
// fsm.CompressionLevel): the backend refuses those codecs with the error
// replication gives. With late set, the check passes and the append is
// refused instead, as when an older member joins between the two.
type belowCompression struct {
	backend.Kafka
	late bool
}

func (b belowCompression) refusal(c batch.Compression) error {
	if c == batch.CompressionNone || c == batch.CompressionGzip {
		return nil
	}
	return &backend.FeatureLevelError{Command: fmt.Sprintf("append of %s batches", c), Need: 4, Cluster: 3}
}

func (b belowCompression) CheckCompression(c batch.Compression) error {
	if b.late {
		return nil
	}
	return b.refusal(c)
}

func (b belowCompression) Append(ctx context.Context, a backend.Append) ([]int64, error) {
	for _, pb := range a.Batches {
		if info, err := batch.Peek(pb.Batch); err == nil && b.refusal(info.Compression()) != nil {
			return nil, b.refusal(info.Compression())
		}
	}
	return b.Kafka.Append(ctx, a)
}

// compressedRecords is records(values) compressed with c.
func compressedRecords(t *testing.T, c batch.Compression, values ...string) []byte {
	t.Helper()
	b, err := batch.Compress(records(t, values...), c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestProduceCodecsByFeatureLevel: while a member's build does not read
// snappy, lz4 and zstd, a batch of theirs is UNSUPPORTED_COMPRESSION_TYPE
// on every topic, and the other partitions of the request are appended;
// once every member reads them they are accepted everywhere, compacted
// topics included, and decoded whole (a snappy batch that is not snappy is
// CORRUPT_MESSAGE).
func TestProduceCodecsByFeatureLevel(t *testing.T) {
	codecs := []batch.Compression{batch.CompressionSnappy, batch.CompressionLZ4, batch.CompressionZstd}
	// produce sends b to topic-0 and a plain batch to topic-1 in one
	// request, and returns their codes.
	produce := func(c *rawClient, topic string, b []byte) (int16, int16) {
		req := produceReq(9, -1, topic, 0, b)
		op := kmsg.NewProduceRequestTopicPartition()
		op.Partition, op.Records = 1, records(t, "plain")
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, op)
		resp := c.do(req).(*kmsg.ProduceResponse)
		ps := resp.Topics[0].Partitions
		return ps[0].ErrorCode, ps[1].ErrorCode
	}
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprintf("below the level, refused late %t", late), func(t *testing.T) {
			tn := startNode(t, func(o *Options) { o.Backend = belowCompression{Kafka: o.Backend, late: late} })
			tn.createTopic("plain", 2, nil)
			tn.createTopic("compacted", 2, map[string]string{"cleanup.policy": "compact"})
			c := dial(t, tn.addr)
			for _, topic := range []string{"plain", "compacted"} {
				for _, codec := range codecs {
					first, second := produce(c, topic, compressedRecords(t, codec, "a", "b"))
					if first != errUnsupportedCompression {
						t.Errorf("%s on %s: %s, want UNSUPPORTED_COMPRESSION_TYPE", codec, topic, errorName(first))
					}
					if !late && second != errNone {
						t.Errorf("%s on %s: the plain partition: %s", codec, topic, errorName(second))
					}
				}
				if first, _ := produce(c, topic, compressedRecords(t, batch.CompressionGzip, "g")); first != errNone {
					t.Errorf("gzip on %s: %s", topic, errorName(first))
				}
				if off, _ := tn.backend.Offsets(topic, 0); off.End != 1 {
					t.Errorf("%s-0 ends at %d; only the gzip batch was to be appended", topic, off.End)
				}
			}
		})
	}
	t.Run("at the level", func(t *testing.T) {
		tn := startNode(t)
		tn.createTopic("compacted", 2, map[string]string{"cleanup.policy": "compact"})
		c := dial(t, tn.addr)
		for _, codec := range codecs {
			if first, second := produce(c, "compacted", compressedRecords(t, codec, "a", "b")); first != errNone || second != errNone {
				t.Errorf("%s on a compacted topic: %s, %s", codec, errorName(first), errorName(second))
			}
		}
		if off, _ := tn.backend.Offsets("compacted", 0); off.End != 6 {
			t.Errorf("compacted-0 ends at %d, want 6", off.End)
		}
		notSnappy := withAttributes(records(t, "x"), int16(batch.CompressionSnappy), -1)
		if first, _ := produce(c, "compacted", notSnappy); first != errCorruptMessage {
			t.Errorf("a snappy batch that is not snappy: %s, want CORRUPT_MESSAGE", errorName(first))
		}
	})
}

// TestLogdClientFetchesKafkaSnappy: records a Kafka client produces with
// snappy (kgo writes one raw block) are read back by logd's own client,
// which gets them decoded by the Connect API's fetch.
func TestLogdClientFetchesKafkaSnappy(t *testing.T) {
	tn := startNode(t)
	tn.createTopic("snappy", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	kc := newKgo(t, tn.addr, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.SnappyCompression()),
		kgo.DefaultProduceTopic("snappy"), kgo.ProducerLinger(50*time.Millisecond))
	const n = 300
	recs := make([]*kgo.Record, n)
	for i := range recs {
		// Repetitive values, so kgo keeps the compressed batch.
		recs[i] = &kgo.Record{Key: []byte(fmt.Sprint("k", i%7)), Value: []byte(fmt.Sprintf("value %03d of a snappy batch", i)),
			Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(fmt.Sprint(i))}}}
	}
	if err := kc.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r, err := tn.backend.Read("snappy", 0, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := batch.Peek(r.Batches); err != nil || info.Compression() != batch.CompressionSnappy {
		t.Fatalf("stored batch: %s, %v; want snappy", info.Compression(), err)
	}

	srv := server.New(server.Options{Backend: tn.backend})
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	lc, err := client.New(hs.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	var got []client.FetchedRecord
	for next := int64(0); len(got) < n; {
		resp, err := lc.Fetch(ctx, client.FetchRequest{Topic: "snappy", Partition: 0, Offset: next})
		if err != nil {
			t.Fatalf("fetch at %d: %v", next, err)
		}
		if len(resp.Records) == 0 {
			t.Fatalf("fetch at %d: no records, end %d", next, resp.End)
		}
		got = append(got, resp.Records...)
		next = resp.Next
	}
	for i, g := range got {
		w := recs[i]
		if g.Offset != w.Offset || string(g.Key) != string(w.Key) || string(g.Value) != string(w.Value) ||
			len(g.Headers) != 1 || g.Headers[0].Key != "i" || string(g.Headers[0].Value) != fmt.Sprint(i) {
			t.Fatalf("record %d: %d %q=%q %v; produced %d %q=%q", i, g.Offset, g.Key, g.Value, g.Headers, w.Offset, w.Key, w.Value)
		}
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("timed out")
	}
}
