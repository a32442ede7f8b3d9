package kafka

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/queue"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkShareConsume drains b.N records of a 4-partition topic with
// ACCEPT for each, through 4 franz-go share consumers ("kafka-share"),
// and, in the same run, through 4 workers of logd's queue API claiming
// 500 records and acking them in one call ("queue-api": the commands
// `logctl bench queue` measures through the Connect API, here without
// its network hop). Reported: records/s and CPU seconds of the whole
// process (node, front end and clients) per million records.
//
//	go test -run '^$' -bench ShareConsume -benchtime 50000x ./kafka
func BenchmarkShareConsume(b *testing.B) {
	for _, path := range []string{"kafka-share", "queue-api"} {
		b.Run(path, func(b *testing.B) {
			tn := startNode(b)
			topic := "bench-" + path
			tn.createTopic(topic, 4, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			if _, err := tn.backend.CreateQueueGroup(ctx, backend.QueueCreate{Topic: topic, Group: "g", Config: queue.Config{MaxInFlight: 10_000}}); err != nil {
				b.Fatal(err)
			}
			benchFill(b, ctx, tn.addr, topic, b.N)
			done := func() bool {
				info, err := tn.backend.DescribeQueueGroup(topic, "g", time.Now().UnixNano())
				if err != nil {
					b.Fatal(err)
				}
				var acked int64
				for _, p := range info.Partitions {
					acked += p.Acked
				}
				return acked == int64(b.N)
			}
			cctx, ccancel := context.WithCancel(ctx)
			var wg sync.WaitGroup
			cpu0 := cpuTime(b)
			b.ResetTimer()
			start := time.Now()
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if path == "queue-api" {
						for cctx.Err() == nil {
							res, err := tn.backend.QueueClaimWait(cctx, backend.QueueClaim{Topic: topic, Group: "g", Max: 500, Lease: time.Minute}, 100*time.Millisecond, nil)
							if err != nil || len(res.Records) == 0 {
								continue
							}
							toks := make([]queue.Token, len(res.Records))
							for i, r := range res.Records {
								toks[i] = r.Token
							}
							tn.backend.QueueAck(cctx, backend.QueueAck{Topic: topic, Group: "g", Tokens: toks})
						}
						return
					}
					cl, err := kgo.NewClient(kgo.SeedBrokers(tn.addr), kgo.ShareGroup("g"), kgo.ConsumeTopics(topic), kgo.ShareMaxRecords(500), kgo.FetchMaxWait(100*time.Millisecond))
					if err != nil {
						b.Error(err)
						return
					}
					defer cl.Close()
					for cctx.Err() == nil {
						fs := cl.PollRecords(cctx, 500)
						for _, r := range fs.Records() {
							r.Ack(kgo.AckAccept)
						}
					}
				}()
			}
			for !done() {
				select {
				case <-time.After(20 * time.Millisecond):
				case <-ctx.Done():
					b.Fatal("not drained")
				}
			}
			elapsed := time.Since(start)
			b.StopTimer()
			cpu := cpuTime(b) - cpu0
			ccancel()
			wg.Wait()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
			b.ReportMetric(cpu.Seconds()/float64(b.N)*1e6, "cpu-s/1M")
		})
	}
}

// benchFill produces n records of 128 bytes to topic.
func benchFill(b *testing.B, ctx context.Context, addr, topic string, n int) {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	val := make([]byte, 128)
	for i := 0; i < n; i += 1000 {
		recs := make([]*kgo.Record, 0, 1000)
		for j := i; j < min(i+1000, n); j++ {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(val[:0:0], "%0128d", j)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
}
