package kafka

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/internal/e2e"
	"github.com/logd-dev/logd/replication/replicationtest"
)

// TestKgoIdempotentDroppedReply: kgo with its default settings (an
// idempotent producer, acks=all) produces keyed records one at a time
// through a proxy that drops the reply to the first Produce, so kgo
// certainly sends that batch again: with idempotence every record is in
// the log once, in order, the retry answered with the original offset.
// The same run with idempotence off, in the client or in the broker (a
// cluster below the producers' feature level), shows the duplicate the
// retry makes, which is what the first run's check would catch.
func TestKgoIdempotentDroppedReply(t *testing.T) {
	const records = 20
	for _, tc := range []struct {
		name string
		// client turns kgo's idempotence off; brokerLevel runs the node
		// below the producers' feature level (0: its build's), where kgo
		// finds no InitProducerId and produces without a producer id.
		client      bool
		brokerLevel backend.FeatureLevel
		idempotent  bool
	}{
		{name: "idempotent", idempotent: true},
		{name: "idempotence off in the client", client: true},
		{name: "idempotence off in the broker", brokerLevel: 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			tn := startNodeWith(t, replicationtest.Options{FeatureLevel: tc.brokerLevel}, func(o *Options) { o.Advertise = ln.Addr().String() })
			tn.createTopic("drop", 1, nil)
			p := e2e.StartDropProxy(t, ln, tn.addr)
			// kgo's defaults but for a quicker metadata refresh, which it
			// waits for before it sends the batch again.
			opts := []kgo.Opt{kgo.DefaultProduceTopic("drop"), kgo.MetadataMinAge(100 * time.Millisecond)}
			if tc.client {
				opts = append(opts, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()))
			}
			cl := newKgo(t, ln.Addr().String(), opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for i := range records {
				v := fmt.Sprintf("v%02d", i)
				if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
					t.Fatalf("produce %s: %v", v, err)
				}
			}
			if !p.Dropped() {
				t.Fatal("no Produce reply was dropped")
			}
			rr, err := tn.backend.Read("drop", 0, 0, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if info, err := batch.Peek(rr.Batches); err != nil || (info.ProducerID >= 0) != tc.idempotent {
				t.Fatalf("first batch's producer id %d (%v); idempotent %v", info.ProducerID, err, tc.idempotent)
			}
			got := batchValues(t, rr.Batches, 0)
			want := make([]string, 0, records+1)
			if !tc.idempotent {
				want = append(want, "v00") // the retry of the dropped reply's batch
			}
			for i := range records {
				want = append(want, fmt.Sprintf("v%02d", i))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("log holds %q\nwant %q", got, want)
			}
		})
	}
}
