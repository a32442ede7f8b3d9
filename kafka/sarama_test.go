package kafka

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	gometrics "github.com/rcrowley/go-metrics"

	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/internal/e2e"
)

// saramaConfig is sarama's default configuration, without its metrics,
// which would start a goroutine that never ends (goleak).
func saramaConfig() *sarama.Config {
	gometrics.UseNilMetrics = true
	return sarama.NewConfig()
}

// TestSaramaPinnedOld: sarama pinned to Kafka 0.10.0 (Version
// V0_10_0_0, as old configurations pin it) sends Produce 2 and
// ListOffsets 0, which logd does not serve: the producer's send and the
// partition consumer's start fail with ErrUnsupportedVersion, an error the
// application sees, where a closed connection gave the producer a socket
// error to retry and left the consumer reading nothing.
func TestSaramaPinnedOld(t *testing.T) {
	tn := startNode(t)
	tn.createTopic("pinned", 1, nil)
	cfg := saramaConfig()
	cfg.Version = sarama.V0_10_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.Retry.Max = 0
	cfg.Metadata.Retry.Max = 0
	p, err := sarama.NewSyncProducer([]string{tn.addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "pinned", Value: sarama.StringEncoder("x")}); !errors.Is(err, sarama.ErrUnsupportedVersion) {
		t.Fatalf("send pinned to 0.10.0: %v; want %v", err, sarama.ErrUnsupportedVersion)
	}
	c, err := sarama.NewConsumer([]string{tn.addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if pc, err := c.ConsumePartition("pinned", 0, sarama.OffsetOldest); !errors.Is(err, sarama.ErrUnsupportedVersion) {
		if pc != nil {
			pc.Close()
		}
		t.Fatalf("consume pinned to 0.10.0: %v; want %v", err, sarama.ErrUnsupportedVersion)
	}
}

// TestSaramaIdempotentDroppedReply: sarama's idempotent producer
// (Producer.Idempotent with acks=all, one request in flight and retries)
// sends keyed records one at a time through a proxy that drops the reply
// to the first Produce: every record is in the log once, in order. The
// control, the same run with Producer.Idempotent=false, shows the
// duplicate sarama's retry of that batch makes, which is what the first
// run's check would catch.
func TestSaramaIdempotentDroppedReply(t *testing.T) {
	const records = 10
	for _, tc := range []struct {
		name       string
		idempotent bool
	}{
		{name: "idempotent", idempotent: true},
		{name: "idempotence off in the client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			tn := startNode(t, func(o *Options) { o.Advertise = ln.Addr().String() })
			tn.createTopic("sdrop", 1, nil)
			px := e2e.StartDropProxy(t, ln, tn.addr)
			cfg := saramaConfig()
			cfg.Version = sarama.V2_8_0_0
			cfg.Producer.Idempotent = tc.idempotent
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			cfg.Producer.Return.Successes = true
			cfg.Producer.Retry.Max = 5
			cfg.Producer.Retry.Backoff = 50 * time.Millisecond
			cfg.Net.MaxOpenRequests = 1
			p, err := sarama.NewSyncProducer([]string{ln.Addr().String()}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			var want []string
			if !tc.idempotent {
				want = append(want, "s00") // the retry of the dropped reply's batch
			}
			for i := range records {
				v := fmt.Sprintf("s%02d", i)
				want = append(want, v)
				if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "sdrop", Key: sarama.StringEncoder(v), Value: sarama.StringEncoder(v)}); err != nil {
					t.Fatalf("send %s: %v", v, err)
				}
			}
			if !px.Dropped() {
				t.Fatal("no Produce reply was dropped")
			}
			rr, err := tn.backend.Read("sdrop", 0, 0, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			got := batchValues(t, rr.Batches, 0)
			if !slices.Equal(got, want) {
				t.Fatalf("log holds %q\nwant %q", got, want)
			}
			if info, err := batch.Peek(rr.Batches); err != nil || (info.ProducerID >= 0) != tc.idempotent {
				t.Fatalf("first batch's producer id %d (%v); idempotent %v", info.ProducerID, err, tc.idempotent)
			}
		})
	}
}
