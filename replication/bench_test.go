package replication

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
)

// BenchmarkGroupCommit measures small appends from many concurrent
// proposers on a single-node group: every op is one Raft entry that must be
// fsynced in the Raft log before it is acknowledged, so throughput comes
// from many entries sharing one fsync.
func BenchmarkGroupCommit(b *testing.B) {
	for _, batchCh := range []bool{false, true} {
		for _, par := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("batchApplyCh=%v/proposers=%d", batchCh, par), func(b *testing.B) {
				dir := b.TempDir()
				n, err := Open(Config{NodeID: "n1", DataDir: dir, RaftBind: "127.0.0.1:0", Bootstrap: true,
					Logger: fsmtest.Logger(), RaftLogLevel: "error", BatchApplyCh: batchCh})
				if err != nil {
					b.Fatal(err)
				}
				defer n.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				if err := n.WaitLeader(ctx); err != nil {
					b.Fatal(err)
				}
				for !n.IsLeader() {
					time.Sleep(time.Millisecond)
				}
				if _, err := NewBackend(n).createTopic(ctx, fsm.CreateTopic{Name: "b", Partitions: 8}); err != nil {
					b.Fatal(err)
				}
				payload := mustBatchB(b, string(make([]byte, 128)))
				b.SetBytes(128)
				b.SetParallelism(par)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					i := 0
					for pb.Next() {
						i++
						if _, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "b", Batches: []fsm.PartitionBatch{{Partition: int32(i % 8), Batch: payload}}}); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
			})
		}
	}
}
