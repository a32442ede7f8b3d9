package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logd-dev/logd/internal/e2e"
)

// TestKafkaGroupLeaderKill: a kgo group consumer reads a three-node
// cluster through the Kafka listeners while the Raft leader, its group
// coordinator, is SIGKILLed. The coordinator's members are in its memory
// only: the consumer finds the new leader (FindCoordinator from any
// node), is unknown there, joins again and resumes from the committed
// offsets, which are replicated. Every record is consumed at least once
// (those consumed after the last commit that reached the old leader are
// consumed again), and the group's commits end at the end of every
// partition. It needs a cluster and a rebalance per kill (tens of
// seconds), so it runs in make fault only (LOGD_FAULT_LONG=1); kafka's
// TestGroupCoordinatorMoves covers a coordinator that stops leading in
// the default run.
func TestKafkaGroupLeaderKill(t *testing.T) {
	if !e2e.FaultLong() {
		t.Skip("a cluster with leader kills: make fault (LOGD_FAULT_LONG=1) runs it")
	}
	total, kills := 20_000, 3
	const parts = 3
	c := &e2e.Cluster{T: t}
	var seeds []string
	for i := range 3 {
		kaddr := e2e.FreeAddr(t)
		seeds = append(seeds, kaddr)
		c.Nodes = append(c.Nodes, e2e.NewNode(t, fmt.Sprintf("n%d", i+1), kafkaGroupArgs(kaddr)...))
	}
	c.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e2e.CreateTopic(t, ctx, c.Leader(ctx), "failover", parts, nil)

	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("failover"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.RetryTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	// Small batches (ten records per partition), so that the consumer,
	// which fetches one batch per partition at a time, is still reading
	// when the leader dies.
	const chunk = 10 * parts
	for i := 0; i < total; i += chunk {
		recs := make([]*kgo.Record, 0, chunk)
		for j := i; j < min(i+chunk, total); j++ {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "fo-%06d", j)})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	prod.Close()

	var mu sync.Mutex
	seen := map[string]int{}
	count := func() (distinct, all int) {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range seen {
			all += n
		}
		return len(seen), all
	}
	// kgo's log, printed when the test fails.
	var logMu sync.Mutex
	var kgoLog strings.Builder
	t.Cleanup(func() {
		if t.Failed() {
			logMu.Lock()
			t.Logf("kgo's log:\n%s", e2e.Tail(kgoLog.String(), 8000))
			logMu.Unlock()
		}
	})
	logger := kgo.BasicLogger(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return kgoLog.Write(p)
	}), kgo.LogLevelInfo, nil)
	cl, err := kgo.NewClient(kgo.WithLogger(logger), kgo.SeedBrokers(seeds...), kgo.ConsumerGroup("fo-group"), kgo.ConsumeTopics("failover"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(300*time.Millisecond),
		kgo.FetchMaxPartitionBytes(1), kgo.RetryTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	cctx, ccancel := context.WithCancel(ctx)
	go func() {
		defer close(done)
		for cctx.Err() == nil {
			fs := cl.PollFetches(cctx)
			fs.EachRecord(func(r *kgo.Record) {
				mu.Lock()
				seen[string(r.Value)]++
				mu.Unlock()
			})
			// Errors (the coordinator or a partition leader gone) are
			// retried by kgo; a commit that fails is consumed again.
			commitCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			cl.CommitUncommittedOffsets(commitCtx)
			cancel()
		}
	}()
	defer func() {
		ccancel()
		<-done
		cl.Close()
	}()

	for k := range kills {
		e2e.WaitFor(t, ctx, "the consumer progresses", func() bool { n, _ := count(); return n >= (k+1)*total/(kills+2) })
		ld := c.Leader(ctx)
		t.Logf("kill %d: SIGKILL the leader %s after %d records", k+1, ld.ID, func() int { n, _ := count(); return n }())
		ld.Kill()
		if k < kills-1 {
			ld.Launch("") // back as a follower, from its own Raft state
		}
	}
	e2e.WaitFor(t, ctx, "every record consumed", func() bool { n, _ := count(); return n == total })
	distinct, all := count()
	t.Logf("%d records consumed %d times over %d leader kills (under shared load)", distinct, all, kills)

	// The group's commits reach the end of every partition, on a live node.
	var live *e2e.Node
	for _, nd := range c.Nodes {
		if nd.Cmd != nil {
			live = nd
		}
	}
	gc := groupClient(t, live)
	e2e.WaitFor(t, ctx, "the group's commits at the end", func() bool {
		d, err := gc.DescribeGroup(ctx, "fo-group")
		if err != nil || len(d.Partitions) != parts {
			return false
		}
		for _, p := range d.Partitions {
			if p.Committed != p.End {
				return false
			}
		}
		return true
	})
}

// writerFunc is an io.Writer of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
