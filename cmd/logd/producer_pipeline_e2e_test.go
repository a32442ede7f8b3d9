package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
)

// TestProducerPipelineLeaderFault: the Go client's Producer keeps up to
// five numbered batches in flight per partition (keyed records, small
// batches, so every partition pipelines) into three nodes while the
// leader is SIGKILLed and restarted, or SIGSTOPped past an election and
// resumed. Batches in flight then fail, time out or lose their answers,
// and are sent again at a new leader, whose copy of the partitions'
// producer state answers a repeat as a duplicate and refuses a batch out
// of order. After the cluster heals, every node holds every acknowledged
// record, none twice, none never produced, each partition in the order
// sent (so each key's records in order).
func TestProducerPipelineLeaderFault(t *testing.T) {
	e2e.ParallelShort(t)
	n := 2000
	if e2e.FaultLong() {
		n = 20_000
	}
	for _, fault := range []string{"kill", "pause"} {
		t.Run(fault, func(t *testing.T) { producerPipelineFault(t, fault, n) })
	}
}

func producerPipelineFault(t *testing.T, fault string, n int) {
	const parts = 4
	const topic = "pipe-fault"
	c := e2e.NewCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	leader := c.Leader(ctx)
	e2e.CreateTopic(t, ctx, leader, topic, parts, nil)
	var watcher *e2e.Node // a node that is not faulted: the client's and the trigger's
	for _, nd := range c.Nodes {
		if nd != leader {
			watcher = nd
		}
	}

	faulted := make(chan int64, 1) // records stored when the fault struck
	fctx, stopFault := context.WithCancel(ctx)
	faultDone := make(chan struct{})
	defer func() {
		stopFault()
		<-faultDone
	}()
	go func() {
		defer close(faultDone)
		stored := waitStored(fctx, watcher, topic, int64(n/4))
		switch fault {
		case "kill":
			leader.Kill()
			faulted <- stored
			leader.Launch("")
		case "pause":
			leader.Signal(syscall.SIGSTOP)
			faulted <- stored
			// Paused past an election: another node leads meanwhile.
			time.Sleep(3 * time.Second)
			leader.Signal(syscall.SIGCONT)
		}
	}()

	// Consistent reads: the watcher may not have applied the topic yet.
	cl, err := client.New(watcher.Listen, client.Options{ConsistentReads: true, Retry: client.RetryPolicy{MaxRetryTime: 2 * time.Minute, MaxAttempts: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	p, err := cl.NewProducer(ctx, client.ProducerOptions{Topic: topic, BatchRecords: 5})
	if err != nil {
		t.Fatal(err)
	}
	value := func(i int) string { return fmt.Sprintf("pipe-%06d", i) }
	chs := make([]<-chan client.ProduceResult, n)
	results := make([]client.ProduceResult, n)
	for i := range n {
		// 13 keys over 4 partitions; a little at a time, so that the
		// fault strikes with batches in flight.
		if chs[i], err = p.Send(ctx, client.Record{Key: []byte(strconv.Itoa(i % 13)), Value: []byte(value(i))}); err != nil {
			t.Fatal(err)
		}
		if i%50 == 49 {
			results[i], chs[i] = <-chs[i], nil
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	failed := 0
	for i, ch := range chs {
		if ch != nil {
			results[i] = <-ch
		}
		if results[i].Err == nil {
			acked[value(i)] = true
		} else {
			failed++
			t.Logf("%s: %v", value(i), results[i].Err)
		}
	}
	var atFault int64
	select {
	case atFault = <-faulted:
	case <-ctx.Done():
		t.Fatalf("the %s never struck", fault)
	}
	if atFault >= int64(n) {
		t.Fatalf("every record was stored before the %s: the fault tested nothing", fault)
	}
	c.Converge(ctx)
	for _, nd := range c.Nodes {
		seen := map[string]bool{}
		for part, recs := range nd.ReadAll(ctx, topic, parts) {
			last := -1
			for _, r := range recs {
				v := string(r.Value)
				idx, err := strconv.Atoi(strings.TrimPrefix(v, "pipe-"))
				switch {
				case err != nil || idx >= n:
					t.Fatalf("%s: partition %d holds %q, never produced", nd.ID, part, v)
				case seen[v]:
					t.Fatalf("%s: %q twice (a retry written again)", nd.ID, v)
				case idx <= last:
					t.Fatalf("%s: partition %d holds %q after record %d: out of the order produced", nd.ID, part, v, last)
				}
				seen[v], last = true, idx
			}
		}
		for v := range acked {
			if !seen[v] {
				t.Fatalf("%s: acknowledged %q is lost", nd.ID, v)
			}
		}
	}
	t.Logf("%s with %d records stored: %d acknowledged, %d failed; every node holds each once, in order", fault, atFault, len(acked), failed)
}
