package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/replication"
	"github.com/logd-dev/logd/server"
)

// BenchmarkProduceIdempotencyKeys produces 128-byte records, 1,000 per
// call from 8 concurrent callers, to a fresh single-node server, with and
// without a unique idempotency key per record: ns/op is per record. The
// keyed topic's window is filled to its bound (100k keys) first, so every
// key measured evicts the oldest: the worst case. Client and server share
// the process, as logctl bench and logd share a machine.
func BenchmarkProduceIdempotencyKeys(b *testing.B) {
	for _, keyed := range []bool{false, true} {
		name := "plain"
		if keyed {
			name = "keyed"
		}
		b.Run(name, func(b *testing.B) {
			c := produceBenchServer(b)
			ctx := context.Background()
			var seq atomic.Int64
			value := make([]byte, 128)
			call := func(recs []client.Record, key []byte) {
				if keyed {
					first := seq.Add(int64(len(recs))) - int64(len(recs))
					for i := range recs {
						key = strconv.AppendInt(key[:len("bench-")], first+int64(i), 10)
						recs[i].IdempotencyKey = string(key)
					}
				}
				if _, err := c.Produce(ctx, "p", recs); err != nil {
					b.Error(err)
				}
			}
			newCall := func() []client.Record {
				recs := make([]client.Record, 1000)
				for i := range recs {
					recs[i].Value = value
				}
				return recs
			}
			// Fill the window (and warm the server either way).
			recs, key := newCall(), []byte("bench-")
			for range 100 {
				call(recs, key)
			}
			var next atomic.Int64
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					recs, key := newCall(), []byte("bench-")
					for next.Add(1000)-1000 < int64(b.N) {
						call(recs, key)
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
		})
	}
}

// produceBenchServer runs a single-node server over HTTP with topic "p"
// of 8 partitions.
func produceBenchServer(b *testing.B) *client.Client {
	b.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := replication.Open(replication.Config{NodeID: "n1", DataDir: b.TempDir(), RaftBind: "127.0.0.1:0", Bootstrap: true, Logger: logger, RaftLogLevel: "error"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	for !n.IsLeader() {
		time.Sleep(time.Millisecond) // no event to wait on for leadership
	}
	hs := httptest.NewServer(server.New(server.Options{Node: n, Logger: logger}).Handler())
	b.Cleanup(hs.Close)
	c, err := client.New(hs.URL, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	for attempt := 0; ; attempt++ {
		_, err := c.CreateTopic(context.Background(), "p", 8, nil)
		if err == nil {
			return c
		}
		if attempt > 500 {
			b.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // the server refuses calls until caught up
	}
}
