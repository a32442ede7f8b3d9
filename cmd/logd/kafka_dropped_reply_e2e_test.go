package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/internal/e2e"
)

// TestKafkaDroppedReplyClients: kcat (librdkafka) and kafkajs produce
// keyed records with acks=all through a proxy (e2e.DropProxy) that drops
// the reply to their first Produce after logd wrote its batch, so the
// client certainly sends that batch again. Asked to be idempotent (kcat
// `-X enable.idempotence=true`, kafkajs `idempotent: true`), every record
// is in the log once, none lost, each partition's in the order produced.
// The control runs each with idempotence off in the client and requires
// the duplicate the retry makes: it proves the proxy made the client
// retry, so the idempotent run's check had something to catch. 300
// records a run; 5,000 under make fault.
func TestKafkaDroppedReplyClients(t *testing.T) {
	n := 300
	if e2e.FaultLong() {
		n = 5000
	}
	const parts = 3
	for _, tc := range []struct {
		name       string
		client     string
		idempotent bool
	}{
		{name: "kcat/idempotent", client: "kcat", idempotent: true},
		{name: "kcat/idempotence off", client: "kcat"},
		{name: "kafkajs/idempotent", client: "kafkajs", idempotent: true},
		{name: "kafkajs/idempotence off", client: "kafkajs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The tool first: a missing one skips before a node starts.
			var bin string
			var value func(int) string
			switch tc.client {
			case "kcat":
				bin, value = kcat(t), func(i int) string { return fmt.Sprintf("kcat-%05d", i) }
			case "kafkajs":
				bin, value = kafkajsNode(t), func(i int) string { return string(kafkajsRecord(i).Value) }
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			paddr := ln.Addr().String()
			kaddr := e2e.FreeAddr(t)
			// Clients find the broker at the proxy: it is what the node
			// advertises.
			nd := e2e.StartNode(t, "--kafka-listen", kaddr, "--kafka-advertise", paddr)
			px := e2e.StartDropProxy(t, ln, kaddr)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			const topic = "dropped"
			e2e.CreateTopic(t, ctx, nd, topic, parts, nil)

			switch tc.client {
			case "kcat":
				var sb strings.Builder
				for i := range n {
					fmt.Fprintf(&sb, "k%d:%s\n", i%31, value(i))
				}
				file := filepath.Join(t.TempDir(), "records.txt")
				if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				// Small batches, so the dropped reply is one of many; -E,
				// since kcat otherwise exits when its one broker's
				// connection is cut ("All broker connections are down").
				args := []string{"-b", paddr, "-P", "-E", "-t", topic, "-K", ":", "-X", "acks=all",
					"-X", "batch.num.messages=20", "-X", "linger.ms=1", "-l", file}
				if tc.idempotent {
					args = append(args, "-X", "enable.idempotence=true")
				}
				runKcat(t, ctx, bin, args...) // exits 0 once every record is acknowledged
			case "kafkajs":
				var res struct{}
				runKafkajs(t, ctx, bin, "produce", map[string]any{"broker": paddr, "topic": topic, "count": n, "perSend": 20, "idempotent": tc.idempotent}, &res)
			}
			if !px.Dropped() {
				t.Fatal("no Produce reply was dropped")
			}
			dups := checkDroppedReply(t, nd.ReadAll(ctx, topic, parts), n, value, tc.idempotent)
			if !tc.idempotent {
				if dups == 0 {
					t.Fatal("idempotence off, and no record written twice: the client did not send the dropped reply's batch again")
				}
				t.Logf("idempotence off: %d records written twice", dups)
			}
		})
	}
}

// checkDroppedReply checks that the log holds every record value(0..n-1)
// and returns how many it holds more than once. With inOrder it fails on
// any duplicate and on a partition whose records are not in the order
// produced.
func checkDroppedReply(t *testing.T, got map[int32][]*logdv1.FetchedRecord, n int, value func(int) string, inOrder bool) (dups int) {
	t.Helper()
	index := make(map[string]int, n)
	for i := range n {
		index[value(i)] = i
	}
	seen := make(map[string]int, n)
	for p, recs := range got {
		last := -1
		for _, r := range recs {
			i, ok := index[string(r.Value)]
			if !ok {
				t.Fatalf("%q at %d/%d was never produced", r.Value, p, r.Offset)
			}
			if seen[string(r.Value)]++; seen[string(r.Value)] > 1 {
				dups++
				if inOrder {
					t.Fatalf("%q written twice (again at %d/%d)", r.Value, p, r.Offset)
				}
			}
			if inOrder && i < last {
				t.Fatalf("partition %d: %q at %d after %s", p, r.Value, r.Offset, value(last))
			}
			last = max(last, i)
		}
	}
	for i := range n {
		if seen[value(i)] == 0 {
			t.Fatalf("%s acknowledged, not in the log", value(i))
		}
	}
	t.Logf("%d records, %d partitions: %s", n, len(got), partitionCounts(got))
	return dups
}

// partitionCounts renders how many records each partition holds.
func partitionCounts(got map[int32][]*logdv1.FetchedRecord) string {
	var sb strings.Builder
	for p := range int32(len(got)) {
		if sb.Len() > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.Itoa(int(p)) + ": " + strconv.Itoa(len(got[p])))
	}
	return sb.String()
}
