package kafka

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	gometrics "github.com/rcrowley/go-metrics"
)

// saramaHandler consumes a claim's messages, marking each once consumed,
// and counts the claims of each session.
type saramaHandler struct {
	name string
	c    *consumed
	mu   sync.Mutex
	// claimed is the number of partitions of the current session.
	claimed int
}

func (h *saramaHandler) Setup(s sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.claimed = 0
	for _, ps := range s.Claims() {
		h.claimed += len(ps)
	}
	return nil
}

func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		h.c.mu.Lock()
		v := string(msg.Value)
		h.c.by[v] = append(h.c.by[v], h.name)
		h.c.count[h.name]++
		h.c.mu.Unlock()
		s.MarkMessage(msg, "")
	}
	return nil
}

func (h *saramaHandler) partitions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.claimed
}

// TestSaramaGroupRange: two members of a sarama consumer group with the
// range assignor (eager: everything is revoked at each rebalance, and
// sarama commits what it marked before joining again) consume every
// record of a topic between them while it is written; their commits end
// at the end of every partition.
func TestSaramaGroupRange(t *testing.T) {
	// sarama's metrics would start a goroutine that never ends (goleak).
	gometrics.UseNilMetrics = true
	tn := startNode(t, fastGroups)
	tn.createTopic("sar", 4, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const total = 400
	produceValues(t, ctx, tn.addr, "sar", 0, total/2, 4)

	cfg := sarama.NewConfig()
	cfg.ClientID = "logd-test"
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Group.Session.Timeout = 3 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Timeout = 10 * time.Second
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond

	c := newConsumed()
	var wg sync.WaitGroup
	var errs []error
	var errsMu sync.Mutex
	run := func(name string) *saramaHandler {
		g, err := sarama.NewConsumerGroup([]string{tn.addr}, "sg", cfg)
		if err != nil {
			t.Fatal(err)
		}
		h := &saramaHandler{name: name, c: c}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer g.Close()
			for ctx.Err() == nil {
				if err := g.Consume(ctx, []string{"sar"}, h); err != nil && ctx.Err() == nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
					errsMu.Lock()
					errs = append(errs, err)
					errsMu.Unlock()
					return
				}
			}
		}()
		return h
	}
	a := run("a")
	waitFor(t, 30*time.Second, "a consumes", func() bool { n, _ := c.total(); return n >= 50 })
	b := run("b")
	waitFor(t, 30*time.Second, "both members claim partitions", func() bool { return a.partitions() == 2 && b.partitions() == 2 })
	produceValues(t, ctx, tn.addr, "sar", total/2, total, 4)
	waitFor(t, 30*time.Second, "every record consumed", func() bool { n, _ := c.total(); return n == total })
	waitCommittedEnd(t, tn, "sg", "sar", 4)
	cancel()
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	distinct, all := c.total()
	if distinct != total || c.count["a"] == 0 || c.count["b"] == 0 {
		t.Fatalf("%d distinct records of %d; a consumed %d, b %d", distinct, total, c.count["a"], c.count["b"])
	}
	if all != total {
		t.Logf("%d records consumed twice across the rebalance (sarama promises at least once)", all-total)
	}
	t.Logf("sarama: a consumed %d, b %d", c.count["a"], c.count["b"])
}
