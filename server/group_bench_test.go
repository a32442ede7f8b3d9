package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/replication/replicationtest"
	"github.com/logd-dev/logd/server"
)

const benchParts = 4

// benchRecords is how many records one run reads, over all partitions:
// LOGD_BENCH_RECORDS, default 1,000,000, so a group's join and leave
// (three Raft commits) are amortized as in a long-running consumer.
var benchRecords = func() int {
	if n, err := strconv.Atoi(os.Getenv("LOGD_BENCH_RECORDS")); err == nil && n > 0 {
		return n - n%(benchParts*1000)
	}
	return 1_000_000
}()

// benchServer runs a single-node server over HTTP with topic "bench"
// holding benchRecords records of 100 bytes.
func benchServer(b *testing.B) *client.Client {
	b.Helper()
	c := newBenchServer(b, "bench", benchParts)
	ctx := context.Background()
	value := make([]byte, 100)
	for i := 0; i < benchRecords; i += 1000 {
		recs := make([]client.Record, 1000)
		for j := range recs {
			p := int32(j % benchParts)
			recs[j] = client.Record{Value: value, Partition: &p}
		}
		if _, err := c.Produce(ctx, "bench", recs); err != nil {
			b.Fatal(err)
		}
	}
	return c
}

// BenchmarkConsumeGroupVsFetch reads the whole topic once per iteration:
// "fetch" with one plain Consumer per partition in parallel, "group" with
// a GroupConsumer (a fresh group each time: join, fenced prefetches of
// every partition, auto-commit every 100 ms plus a final commit, leave).
// The metrics to compare are records/s (the whole run, join and leave
// included) and, for the group, steady-records/s (from the first record
// to the last, without join and leave).
//
//	go test -run '^$' -bench ConsumeGroupVsFetch -benchtime 3x ./server/
func BenchmarkConsumeGroupVsFetch(b *testing.B) {
	c := benchServer(b)
	ctx := context.Background()
	b.Run("fetch", func(b *testing.B) {
		for b.Loop() {
			var wg sync.WaitGroup
			var total atomic.Int64
			for p := int32(0); p < benchParts; p++ {
				wg.Go(func() {
					cs, err := c.NewConsumer(client.ConsumerOptions{Topic: "bench", Partition: p, MaxWait: time.Millisecond})
					if err != nil {
						b.Error(err)
						return
					}
					for cs.Position() < int64(benchRecords/benchParts) {
						recs, err := cs.Poll(ctx)
						if err != nil {
							b.Error(err)
							return
						}
						total.Add(int64(len(recs)))
					}
				})
			}
			wg.Wait()
			if total.Load() != int64(benchRecords) {
				b.Fatalf("read %d records", total.Load())
			}
		}
		b.ReportMetric(float64(benchRecords*b.N)/b.Elapsed().Seconds(), "records/s")
	})
	run := 0
	var steady time.Duration
	b.Run("group", func(b *testing.B) {
		steady = 0
		for b.Loop() {
			run++
			gc, err := c.NewGroupConsumer(client.GroupConsumerOptions{Group: fmt.Sprintf("g%d", run), Topics: []string{"bench"},
				AutoCommitInterval: 100 * time.Millisecond, MaxWait: time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			var first, last time.Time
			for n := 0; n < benchRecords; {
				recs, err := gc.Poll(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if n == 0 && len(recs) > 0 {
					first = time.Now()
				}
				n += len(recs)
				last = time.Now()
			}
			steady += last.Sub(first)
			if err := gc.Close(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(benchRecords*b.N)/b.Elapsed().Seconds(), "records/s")
		b.ReportMetric(float64(benchRecords*b.N)/steady.Seconds(), "steady-records/s")
	})
}

// newBenchServer runs a single-node server over HTTP with an empty topic of
// the given partitions and returns a client of it.
func newBenchServer(b *testing.B, topic string, partitions int32) *client.Client {
	b.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	n := replicationtest.Start(b, replicationtest.Options{})
	hs := httptest.NewServer(server.New(server.Options{Backend: n.Backend, Logger: logger}).Handler())
	b.Cleanup(hs.Close)
	c, err := client.New(hs.URL, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	// The server refuses calls until its state machine has caught up.
	for attempt := 0; ; attempt++ {
		_, err := c.CreateTopic(context.Background(), topic, partitions, nil)
		if err == nil {
			return c
		}
		if attempt > 500 {
			b.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
