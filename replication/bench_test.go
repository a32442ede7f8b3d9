package replication

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/logd-dev/logd/backend"
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

// BenchmarkDataGroupsProduce measures Produce on one node with 0 data
// groups (every partition in the meta group, as before data groups) and
// with 1 and 4 (an 8-partition topic placed over them): 16 concurrent
// callers, each call 100 keyed records of 100 bytes (spread over the
// partitions, so a call spans every group) or one record. On one machine
// more groups add Raft logs to fsync, not cores: the figures say what the
// split and the per-group entries cost (docs/performance.md, "Raft
// groups").
func BenchmarkDataGroupsProduce(b *testing.B) {
	for _, groups := range []int{0, 1, 4} {
		for _, perCall := range []int{100, 1} {
			b.Run(fmt.Sprintf("groups=%d/records=%d", groups, perCall), func(b *testing.B) {
				ctx, bk := benchGroupsNode(b, groups)
				value := make([]byte, 100)
				b.SetBytes(int64(100 * perCall))
				b.SetParallelism(8) // 16 callers on 2 cores
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					i := 0
					for pb.Next() {
						recs := make([]backend.ProduceRecord, perCall)
						for j := range recs {
							i++
							recs[j] = backend.ProduceRecord{Key: fmt.Appendf(nil, "k%d", i), Value: value}
						}
						if _, err := bk.Produce(ctx, backend.ProduceRequest{Topic: "b", Records: recs}); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N*perCall)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}

// BenchmarkDataGroupsProduceKeyless is the single-node shape of
// make bench-system's "1 client x 500 in flight" row, one level down: one
// caller, calls of 500 keyless 128-byte records to an 8-partition topic,
// with 0 data groups (the meta group, as before) and with 1 and 4 (a
// keyless call goes to one group's partitions). With -benchmem it gives
// what a call allocates on each path (docs/performance.md, "Data groups
// by default").
func BenchmarkDataGroupsProduceKeyless(b *testing.B) {
	for _, groups := range []int{0, 1, 4} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			ctx, bk := benchGroupsNode(b, groups)
			value := make([]byte, 128)
			const perCall = 500
			b.SetBytes(128 * perCall)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				recs := make([]backend.ProduceRecord, perCall)
				for j := range recs {
					recs[j] = backend.ProduceRecord{Value: value}
				}
				if _, err := bk.Produce(ctx, backend.ProduceRequest{Topic: "b", Records: recs}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*perCall)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// leadsAll reports whether n leads every data group it runs.
func leadsAll(n *Node) bool {
	for _, r := range n.DataGroupReplicas() {
		if r.Raft.State() != raft.Leader {
			return false
		}
	}
	return true
}

// spreadRecords is one record for each of n partitions, from first.
func spreadRecords(first, n int) []backend.ProduceRecord {
	out := make([]backend.ProduceRecord, n)
	for i := range out {
		out[i] = backend.ProduceRecord{Partition: int32(first + i), HasPartition: true, Value: []byte("warm")}
	}
	return out
}

// benchGroupsNode opens one node with groups data groups that it leads,
// and a topic "b" of 8 partitions placed over them, every group having
// adopted its partitions: the setup of the data-group produce
// benchmarks. The node closes when b ends.
func benchGroupsNode(b *testing.B, groups int) (context.Context, *Backend) {
	b.Helper()
	n, err := Open(Config{NodeID: "n1", DataDir: b.TempDir(), RaftBind: "127.0.0.1:0", Bootstrap: true,
		Logger: fsmtest.Logger(), RaftLogLevel: "error", DataGroupsPerNode: groups, BatchApplyCh: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(cancel)
	for !n.IsLeader() || !n.Ready() || len(n.DataGroupReplicas()) != groups || !leadsAll(n) {
		time.Sleep(5 * time.Millisecond)
	}
	bk := NewBackend(n)
	if _, err := bk.CreateTopic(ctx, backend.CreateTopic{Name: "b", Partitions: 8}); err != nil {
		b.Fatal(err)
	}
	// Every group adopts its partitions before the clock runs.
	for {
		if _, err := bk.Produce(ctx, backend.ProduceRequest{Topic: "b", Records: spreadRecords(0, 8)}); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return ctx, bk
}
