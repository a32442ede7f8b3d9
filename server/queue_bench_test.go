package server_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
)

// BenchmarkQueueClaimAck is the claim+ack row of make bench-system in one
// process: b.N records of 128 bytes in 4 partitions, then 8 workers that
// each claim up to 500 records and acknowledge them in one call, until
// every record is acknowledged. ns/op is per record; cpu-ns/record counts
// client and server together, as logctl bench and logd share a machine
// (docs/performance.md, "Queue claim+ack"). Run it with a fixed count
// (-benchtime 400000x): the fill is not timed but grows with b.N.
func BenchmarkQueueClaimAck(b *testing.B) {
	c := newBenchServer(b, "q", 4)
	// Bounds the run: a worker that failed leaves its records leased.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	value := make([]byte, 128)
	recs := make([]client.Record, 5000)
	for i := range recs {
		recs[i].Value = value
	}
	for left := b.N; left > 0; left -= len(recs) {
		if _, err := c.Produce(ctx, "q", recs[:min(left, len(recs))]); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := c.CreateQueueGroup(ctx, "q", "bench", client.QueueGroupConfig{Lease: time.Minute, MaxInFlight: 100_000}, false); err != nil {
		b.Fatal(err)
	}
	var acked atomic.Int64
	b.ResetTimer()
	start, cpu0 := time.Now(), processCPU(b)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			// Each round claims at least one record (the records are all
			// there and the leases outlast the run) until all are acked.
			for acked.Load() < int64(b.N) && ctx.Err() == nil {
				res, err := c.Claim(ctx, client.ClaimRequest{Topic: "q", Group: "bench", MaxRecords: 500, MaxWait: 100 * time.Millisecond})
				if err != nil {
					b.Error(err)
					return
				}
				if len(res.Jobs) == 0 {
					continue // the others hold the rest
				}
				tokens := make([]string, len(res.Jobs))
				for i, j := range res.Jobs {
					tokens[i] = j.Token
				}
				if _, err := c.Ack(ctx, "q", "bench", tokens...); err != nil {
					b.Error(err)
					return
				}
				acked.Add(int64(len(tokens)))
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/record")
}
