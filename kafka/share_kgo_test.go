package kafka

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/queue"
)

// shareOutcome is what share consumers did with a topic's records.
type shareOutcome struct {
	mu       sync.Mutex
	accepted map[string]int // value -> times a member accepted it
	rejected map[string]int
	seen     int
}

func newShareOutcome() *shareOutcome {
	return &shareOutcome{accepted: map[string]int{}, rejected: map[string]int{}}
}

// runShareConsumer polls a share group until ctx ends, acknowledging each
// record with pick's status.
func runShareConsumer(ctx context.Context, t *testing.T, addr, groupID, topic string, out *shareOutcome, pick func(*kgo.Record) kgo.AckStatus, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ShareGroup(groupID), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ctx.Err() == nil {
			fs := cl.PollRecords(ctx, 50)
			if fs.IsClientClosed() {
				return
			}
			for _, r := range fs.Records() {
				st := pick(r)
				out.mu.Lock()
				out.seen++
				switch st {
				case kgo.AckAccept:
					out.accepted[string(r.Value)]++
				case kgo.AckReject:
					out.rejected[string(r.Value)]++
				}
				out.mu.Unlock()
				r.Ack(st)
			}
		}
	}()
	return cl
}

// queueTotals sums a queue group's finished records and whether every
// partition is finished.
func queueTotals(t *testing.T, tn *testNode, topic, groupID string) (acked, dead int64, done bool) {
	t.Helper()
	info, err := tn.backend.DescribeQueueGroup(topic, groupID, time.Now().UnixNano())
	if err != nil {
		return 0, 0, false
	}
	done = true
	for _, p := range info.Partitions {
		acked += p.Acked
		dead += p.DeadLettered
		if p.Start < p.End || p.DeadPending > 0 {
			done = false
		}
	}
	return acked, dead, done
}

// TestKgoShareGroupDrain: three franz-go share consumers drain a
// three-partition topic with random ACCEPT, RELEASE and REJECT. Every
// record ends acked or dead-lettered; the queue group counts each record
// once (acked + dead-lettered = records); every acked record was accepted
// by some member, and every dead-lettered one was rejected or released
// past the delivery limit. It fails if a record is lost, finished twice,
// or an acknowledgement is not applied.
func TestKgoShareGroupDrain(t *testing.T) {
	tn := startNode(t)
	const topic, groupID, n = "share-drain", "workers", 600
	tn.createTopic(topic, 3, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if _, err := tn.backend.CreateQueueGroup(ctx, backend.QueueCreate{Topic: topic, Group: groupID, Config: queue.Config{MaxDeliveries: 3}}); err != nil {
		t.Fatal(err)
	}
	produceValues(t, ctx, tn.addr, topic, 0, n, 20)

	out := newShareOutcome()
	var rmu sync.Mutex
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(*kgo.Record) kgo.AckStatus {
		rmu.Lock()
		defer rmu.Unlock()
		switch x := rng.IntN(10); {
		case x < 7:
			return kgo.AckAccept
		case x < 9:
			return kgo.AckRelease
		}
		return kgo.AckReject
	}
	cctx, ccancel := context.WithCancel(ctx)
	var clients []*kgo.Client
	for range 3 {
		clients = append(clients, runShareConsumer(cctx, t, tn.addr, groupID, topic, out, pick))
	}
	waitFor(t, 50*time.Second, "every record finished", func() bool {
		_, _, done := queueTotals(t, tn, topic, groupID)
		return done
	})
	ccancel()
	for _, cl := range clients {
		cl.Close()
	}
	acked, dead, _ := queueTotals(t, tn, topic, groupID)
	if acked+dead != n {
		t.Fatalf("acked %d + dead-lettered %d, want %d records", acked, dead, n)
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	if int64(len(out.accepted)) < acked {
		t.Fatalf("%d records acked, only %d distinct accepted by members", acked, len(out.accepted))
	}
	if len(out.rejected) == 0 || dead == 0 {
		t.Fatalf("no record rejected (%d) or dead-lettered (%d): the test exercised nothing", len(out.rejected), dead)
	}
	t.Logf("%d deliveries, %d acked, %d dead-lettered", out.seen, acked, dead)
}

var _ = fmt.Sprint
