package kafka

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/internal/e2e"
	"github.com/logd-dev/logd/queue"
	"github.com/logd-dev/logd/replication/replicationtest"
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

// setShareConfigs sets a share group's GROUP-resource settings through
// IncrementalAlterConfigs, as kgo's documentation tells users to.
func setShareConfigs(t *testing.T, ctx context.Context, cl *kgo.Client, groupID string, kv map[string]string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, groupID
	for k, v := range kv {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = k, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(v)
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Resources[0].ErrorCode; code != 0 {
		t.Fatalf("alter group configs: code %d %v", code, resp.Resources[0].ErrorMessage)
	}
}

// TestKgoShareGroupChurn: three franz-go share consumers (the reset to
// earliest, a delivery limit of 3 and a lock of a second set through
// IncrementalAlterConfigs) and a worker of logd's own queue API (what
// logctl queue work calls) drain a topic with random ACCEPT, RELEASE and
// REJECT, one consumer sitting past its lock now and then. Every record
// ends acked or dead-lettered, once (acked + dead-lettered = records,
// every partition finished); every acked record was accepted by a
// member or the worker; the dead-letter topic holds each dead-lettered
// record once, with its reason and attempt history, and a record
// dead-lettered as rejected was rejected by a member. It fails if a
// record is lost, finished twice, acknowledged without effect, or its
// dead letter lacks its history. LOGD_FAULT_LONG=1 (make fault) drains
// 100,000 records of 6 partitions.
func TestKgoShareGroupChurn(t *testing.T) {
	// The long run takes about a minute without the race detector.
	n, partitions, wait := 900, int32(3), time.Minute
	if e2e.FaultLong() {
		n, partitions, wait = 100_000, 6, 15*time.Minute
	}
	shareChurn(t, startNode(t), n, partitions, wait)
}

// TestKgoShareGroupChurnDataGroups is the churn on a topic placed over
// three data groups: the queue group has a copy in each, which the claims,
// acknowledgements and releases of the share group reach.
func TestKgoShareGroupChurnDataGroups(t *testing.T) {
	tn := startNodeWith(t, replicationtest.Options{DataGroupsPerNode: 3})
	shareChurn(t, tn, 300, 3, time.Minute)
	if tp, err := tn.node.FSM().Topic("share-churn"); err != nil || len(placementGroups(tp.Placement)) != 3 {
		t.Fatalf("share-churn is not placed over three data groups: %v", err)
	}
}

// shareChurn is TestKgoShareGroupChurn's run on tn with n records over
// partitions, waiting at most wait for them to finish.
func shareChurn(t *testing.T, tn *testNode, n int, partitions int32, wait time.Duration) {
	const topic, groupID = "share-churn", "workers"
	tn.createTopic(topic, partitions, nil)
	ctx, cancel := context.WithTimeout(t.Context(), wait+time.Minute)
	defer cancel()
	admin := newKgo(t, tn.addr)
	setShareConfigs(t, ctx, admin, groupID, map[string]string{
		backend.ShareAutoOffsetReset: "earliest", backend.ShareDeliveryCountLimit: "3", backend.ShareRecordLockDurationMs: "1000",
	})
	produceValues(t, ctx, tn.addr, topic, 0, n, 50)

	out := newShareOutcome()
	var rmu sync.Mutex
	rng := rand.New(rand.NewPCG(1, 2))
	sleeps := 0
	// The slow consumer sits past the lock of its first record (the
	// others start once it has one) and of a few more.
	first := make(chan struct{})
	pick := func(r *kgo.Record, slow bool) kgo.AckStatus {
		rmu.Lock()
		x := rng.IntN(20)
		sleep := slow && (sleeps == 0 || x == 0 && sleeps < 3)
		if sleep {
			if sleeps == 0 {
				close(first)
			}
			sleeps++
		}
		rmu.Unlock()
		if sleep {
			// Sit past the lock: the acknowledgement is refused and
			// the record delivered again.
			select {
			case <-time.After(time.Until(r.AcquisitionDeadline()) + 100*time.Millisecond):
			case <-ctx.Done():
			}
		}
		switch {
		case x < 14:
			return kgo.AckAccept
		case x < 18:
			return kgo.AckRelease
		}
		return kgo.AckReject
	}
	cctx, ccancel := context.WithCancel(ctx)
	var clients []*kgo.Client
	for i := range 3 {
		clients = append(clients, runShareConsumer(cctx, t, tn.addr, groupID, topic, out, func(r *kgo.Record) kgo.AckStatus { return pick(r, i == 0) }))
		if i == 0 {
			select {
			case <-first:
			case <-ctx.Done():
				t.Fatal("the slow consumer got no record")
			}
		}
	}
	// A worker of logd's own queue API on the same queue group.
	workerDone := make(chan struct{})
	go func() {
		defer close(workerDone)
		for cctx.Err() == nil {
			res, err := tn.backend.QueueClaimWait(cctx, backend.QueueClaim{Topic: topic, Group: groupID, Max: 20, Lease: time.Second, Worker: "logctl"}, 100*time.Millisecond, nil)
			if err != nil || len(res.Records) == 0 {
				continue
			}
			toks := make([]queue.Token, 0, len(res.Records))
			out.mu.Lock()
			for _, r := range res.Records {
				toks = append(toks, r.Token)
				out.accepted[string(r.Record.Value)]++
			}
			out.mu.Unlock()
			tn.backend.QueueAck(cctx, backend.QueueAck{Topic: topic, Group: groupID, Tokens: toks})
		}
	}()
	waitFor(t, wait, "every record finished", func() bool {
		_, _, done := queueTotals(t, tn, topic, groupID)
		return done
	})
	ccancel()
	<-workerDone
	for _, cl := range clients {
		cl.Close()
	}
	acked, dead, _ := queueTotals(t, tn, topic, groupID)
	if acked+dead != int64(n) {
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
	// The dead letters: each once, with its reason and history.
	dlq := newKgo(t, tn.addr, kgo.ConsumeTopics(queue.DefaultDeadLetterTopic(topic, groupID)), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	reasons := map[string]int{}
	waitFor(t, time.Minute, "every dead letter read", func() bool {
		fs := dlq.PollFetches(ctx)
		for _, r := range fs.Records() {
			h := map[string]string{}
			for _, kv := range r.Headers {
				h[kv.Key] = string(kv.Value)
			}
			origin := h[backend.DLQHeaderPartition] + "/" + h[backend.DLQHeaderOffset]
			if seen[origin] {
				t.Fatalf("%s dead-lettered twice", origin)
			}
			seen[origin] = true
			reasons[h[backend.DLQHeaderReason]]++
			if h[backend.DLQHeaderHistory] == "" {
				t.Fatalf("dead letter %s without its history: %v", origin, h)
			}
			if h[backend.DLQHeaderReason] == queue.ReasonRejected && out.rejected[string(r.Value)] == 0 {
				t.Fatalf("%s (%s) dead-lettered as rejected, but no member rejected it", origin, r.Value)
			}
		}
		return int64(len(seen)) == dead
	})
	rmu.Lock()
	defer rmu.Unlock()
	if sleeps == 0 {
		t.Fatal("no consumer sat past its lock: the test exercised no expiry")
	}
	t.Logf("%d deliveries, %d acked, %d dead-lettered %v; %d locks expired in a consumer", out.seen, acked, dead, reasons, sleeps)
}
