package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	gometrics "github.com/rcrowley/go-metrics"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
)

// TestKafkaIdempotentLeaderFault: an idempotent Kafka producer writes
// keyed records to three nodes while the leader is SIGKILLed and
// restarted, or SIGSTOPped past an election and resumed; its retries of
// batches whose answers were lost must not duplicate anything. After the
// cluster heals, every node holds every acknowledged record, none twice,
// none never produced, and each partition's records in the order
// produced (docs/faults.md's rules). make test runs kgo (its defaults)
// with 1,000 records a fault; make fault runs kgo, sarama
// (Producer.Idempotent), kcat (enable.idempotence=true) and kafkajs
// (idempotent: true) with 20,000 each.
func TestKafkaIdempotentLeaderFault(t *testing.T) {
	e2e.ParallelShort(t)
	n, clients := 1000, []string{"kgo"}
	if e2e.FaultLong() {
		n, clients = 20_000, []string{"kgo", "sarama", "kcat", "kafkajs"}
	}
	for _, cl := range clients {
		for _, fault := range []string{"kill", "pause"} {
			t.Run(cl+"/"+fault, func(t *testing.T) {
				idempotentLeaderFault(t, cl, fault, n)
			})
		}
	}
}

// faultProducer produces records 0..n-1 of the test's values (value(i))
// to topic through seeds, and reports each acknowledged value to acked;
// it returns how many it knows failed.
type faultProducer func(t *testing.T, ctx context.Context, seeds []string, topic string, n int, value func(int) string, acked func(string)) int

// faultProducers are the clients of the fault test, each idempotent.
var faultProducers = map[string]faultProducer{
	"kgo": func(t *testing.T, ctx context.Context, seeds []string, topic string, n int, value func(int) string, acked func(string)) int {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
			kgo.MetadataMinAge(250*time.Millisecond), kgo.RetryTimeout(2*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		failed := 0
		const chunk = 50
		for i := 0; i < n; i += chunk {
			recs := make([]*kgo.Record, 0, chunk)
			for j := i; j < min(i+chunk, n); j++ {
				recs = append(recs, &kgo.Record{Key: []byte(strconv.Itoa(j % 13)), Value: []byte(value(j))})
			}
			for _, r := range cl.ProduceSync(ctx, recs...) {
				if r.Err != nil {
					failed++
				} else {
					acked(string(r.Record.Value))
				}
			}
		}
		return failed
	},
	"sarama": func(t *testing.T, ctx context.Context, seeds []string, topic string, n int, value func(int) string, acked func(string)) int {
		gometrics.UseNilMetrics = true // its meters' goroutine never ends
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V2_8_0_0
		cfg.Producer.Idempotent = true
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Return.Successes = true
		cfg.Producer.Retry.Max = 50
		cfg.Producer.Retry.Backoff = 200 * time.Millisecond
		cfg.Net.MaxOpenRequests = 1
		cfg.Metadata.Retry.Max = 50
		p, err := sarama.NewSyncProducer(seeds, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		failed := 0
		const chunk = 50
		for i := 0; i < n; i += chunk {
			msgs := make([]*sarama.ProducerMessage, 0, chunk)
			for j := i; j < min(i+chunk, n); j++ {
				msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(strconv.Itoa(j % 13)), Value: sarama.StringEncoder(value(j))})
			}
			err := p.SendMessages(msgs)
			var perr sarama.ProducerErrors
			errors.As(err, &perr)
			bad := map[*sarama.ProducerMessage]bool{}
			for _, e := range perr {
				bad[e.Msg] = true
			}
			for _, m := range msgs {
				if err != nil && (bad[m] || len(perr) == 0) {
					failed++
					continue
				}
				acked(string(m.Value.(sarama.StringEncoder)))
			}
		}
		return failed
	},
	"kcat": func(t *testing.T, ctx context.Context, seeds []string, topic string, n int, value func(int) string, acked func(string)) int {
		bin := kcat(t)
		var sb strings.Builder
		for i := range n {
			fmt.Fprintf(&sb, "%d:%s\n", i%13, value(i))
		}
		file := filepath.Join(t.TempDir(), "records.txt")
		if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		// Small batches, so the fault falls among many requests.
		runKcat(t, ctx, bin, "-b", strings.Join(seeds, ","), "-P", "-t", topic, "-K", ":", "-X", "enable.idempotence=true",
			"-X", "batch.num.messages=20", "-X", "linger.ms=1", "-l", file)
		for i := range n { // kcat exits 0 once every record is acknowledged
			acked(value(i))
		}
		return 0
	},
	"kafkajs": func(t *testing.T, ctx context.Context, seeds []string, topic string, n int, value func(int) string, acked func(string)) int {
		bin := kafkajsNode(t)
		var res struct{}
		runKafkajs(t, ctx, bin, "produce", map[string]any{"broker": seeds[0], "topic": topic, "count": n, "perSend": 20, "idempotent": true}, &res)
		for i := range n { // the script exits 0 once every send is acknowledged
			acked(value(i))
		}
		return 0
	},
}

func idempotentLeaderFault(t *testing.T, clientName, fault string, n int) {
	const parts = 4
	const topic = "idem-fault"
	c := &e2e.Cluster{T: t}
	var seeds []string
	for i := range 3 {
		kaddr := e2e.FreeAddr(t)
		seeds = append(seeds, kaddr)
		c.Nodes = append(c.Nodes, e2e.NewNode(t, fmt.Sprintf("n%d", i+1), "--kafka-listen", kaddr))
	}
	c.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	leader := c.Leader(ctx)
	e2e.CreateTopic(t, ctx, leader, topic, parts, nil)
	var watcher *e2e.Node // a node that is not faulted, for the trigger's reads
	for _, nd := range c.Nodes {
		if nd != leader {
			watcher = nd
		}
	}
	// Each client's own values: kafkajs's script makes its own.
	prefix := clientName + "-"
	value := func(i int) string { return fmt.Sprintf("%s%06d", prefix, i) }
	if clientName == "kafkajs" {
		value = func(i int) string { return string(kafkajsRecord(i).Value) }
	}

	faulted := make(chan int64, 1) // records stored when the fault struck
	fctx, stopFault := context.WithCancel(ctx)
	faultDone := make(chan struct{})
	// The fault's goroutine ends (its relaunch of the leader included)
	// before the test's cleanup kills the nodes.
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
	var mu sync.Mutex
	acked := map[string]bool{}
	failed := faultProducers[clientName](t, ctx, seeds, topic, n, value, func(v string) {
		mu.Lock()
		acked[v] = true
		mu.Unlock()
	})
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
	index := func(v string) (int, bool) {
		if clientName == "kafkajs" {
			i, err := strconv.Atoi(strings.TrimPrefix(v, "kafkajs-"))
			return i, err == nil && strings.HasPrefix(v, "kafkajs-") && i < n
		}
		i, err := strconv.Atoi(strings.TrimPrefix(v, prefix))
		return i, err == nil && strings.HasPrefix(v, prefix) && i < n
	}
	for _, nd := range c.Nodes {
		seen := map[string]bool{}
		for p, recs := range nd.ReadAll(ctx, topic, parts) {
			last := -1
			for _, r := range recs {
				v := string(r.Value)
				idx, ok := index(v)
				switch {
				case !ok:
					t.Fatalf("%s: partition %d holds %q, never produced", nd.ID, p, v)
				case seen[v]:
					t.Fatalf("%s: %q twice (a retry written again)", nd.ID, v)
				case idx <= last:
					t.Fatalf("%s: partition %d holds %q after record %d: out of the order produced", nd.ID, p, v, last)
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
	t.Logf("%s %s with %d records stored: %d acknowledged, %d failed (outcome unknown, not counted as lost); every node holds each once, in order",
		clientName, fault, atFault, len(acked), failed)
}

// waitStored waits until topic holds at least want records as nd reads it,
// and returns how many it holds; 0 when ctx ends first.
func waitStored(ctx context.Context, nd *e2e.Node, topic string, want int64) int64 {
	c, err := client.New(nd.Listen, client.Options{Timeout: 5 * time.Second})
	if err != nil {
		return 0
	}
	defer c.Close()
	for ctx.Err() == nil {
		if d, err := c.DescribeTopic(ctx, topic); err == nil {
			var total int64
			for _, p := range d.Partitions {
				total += p.End
			}
			if total >= want {
				return total
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	return 0
}
