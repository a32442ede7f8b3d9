package replication

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/logd-dev/logd/queue"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
)

// heapInUse is the heap allocated after two collections.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkStateMemory reports the heap a node holds per partition (of a
// topic of 2000, idle) and per queue record in flight (20,000 claimed
// under a one-hour lease), the figures of docs/operations.md, "Capacity".
// Run it with -benchtime 1x: each iteration builds a node.
func BenchmarkStateMemory(b *testing.B) {
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		n := openBenchNode(b, ctx)
		h0 := heapInUse()
		if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "p", Partitions: 2000}); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(heapInUse()-h0)/2000, "B/partition")
		if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "q", Partitions: 2}); err != nil {
			b.Fatal(err)
		}
		vals := make([]string, 100)
		for j := range vals {
			vals[j] = "0123456789abcdef"
		}
		for i := range 200 {
			if _, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "q", Batches: []fsm.PartitionBatch{{Partition: int32(i % 2), Batch: mustBatchB(b, vals...)}}}); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := NewBackend(n).createQueueGroup(ctx, fsm.QueueCreate{Topic: "q", Group: "w", Config: queue.Config{MaxInFlight: 100_000, Lease: time.Hour}}); err != nil {
			b.Fatal(err)
		}
		h1 := heapInUse()
		claimed := 0
		for claimed < 20_000 {
			r, err := NewBackend(n).queueClaim(ctx, fsm.QueueClaim{Topic: "q", Group: "w", Max: 1000, Lease: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			if len(r.Records) == 0 {
				b.Fatalf("claimed %d records, want 20000", claimed)
			}
			claimed += len(r.Records)
		}
		b.ReportMetric(float64(heapInUse()-h1)/float64(claimed), "B/in-flight")
		n.Close()
		cancel()
	}
}

// openBenchNode is openSingleNode for a benchmark.
func openBenchNode(b *testing.B, ctx context.Context) *Node {
	b.Helper()
	n, err := Open(Config{NodeID: "n1", DataDir: b.TempDir(), RaftBind: "127.0.0.1:0", Bootstrap: true, Logger: fsmtest.Logger(), RaftLogLevel: "error"})
	if err != nil {
		b.Fatal(err)
	}
	for !n.IsLeader() || !n.Ready() {
		select {
		case <-ctx.Done():
			n.Close()
			b.Fatal("no leader")
		case <-time.After(10 * time.Millisecond):
		}
	}
	return n
}
