package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/internal/e2e"
)

// TestKafkaIdempotentClients: the clients that produce idempotently only
// when asked, asked (docs/kafka.md, "Idempotent producers"): kcat with
// `-X enable.idempotence=true`, which failed at once against a broker
// without InitProducerId, and kafkajs with `idempotent: true`, which
// failed at connect. Each writes keyed records with acks=all, and logd's
// own client reads every one once.
func TestKafkaIdempotentClients(t *testing.T) {
	kaddr := e2e.FreeAddr(t)
	nd := e2e.StartNode(t, "--kafka-listen", kaddr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("kcat", func(t *testing.T) {
		bin := kcat(t)
		const n = 2000
		e2e.CreateTopic(t, ctx, nd, "idem-kcat", 3, nil)
		var sb strings.Builder
		for i := range n {
			fmt.Fprintf(&sb, "k%d:kcat-%05d\n", i%31, i)
		}
		file := filepath.Join(t.TempDir(), "records.txt")
		if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		runKcat(t, ctx, bin, "-b", kaddr, "-P", "-t", "idem-kcat", "-K", ":", "-X", "enable.idempotence=true", "-l", file)
		got := readByValue(t, ctx, nd, "idem-kcat")
		if len(got) != n {
			t.Fatalf("logd's client read %d records, kcat produced %d", len(got), n)
		}
		for i := range n {
			if _, ok := got[fmt.Sprintf("kcat-%05d", i)]; !ok {
				t.Fatalf("kcat-%05d produced, not read", i)
			}
		}
	})

	t.Run("kafkajs", func(t *testing.T) {
		bin := kafkajsNode(t)
		const n, perSend = 300, 30
		e2e.CreateTopic(t, ctx, nd, "idem-js", 3, nil)
		var res struct {
			Sends []struct {
				Meta []struct {
					ErrorCode int `json:"errorCode"`
				} `json:"meta"`
			} `json:"sends"`
		}
		runKafkajs(t, ctx, bin, "produce", map[string]any{"broker": kaddr, "topic": "idem-js", "count": n, "perSend": perSend, "idempotent": true}, &res)
		if len(res.Sends) != n/perSend {
			t.Fatalf("kafkajs reported %d sends, want %d", len(res.Sends), n/perSend)
		}
		got := readByValue(t, ctx, nd, "idem-js")
		if len(got) != n {
			t.Fatalf("logd's client read %d records, kafkajs produced %d", len(got), n)
		}
		for i := range n {
			if _, ok := got[string(kafkajsRecord(i).Value)]; !ok {
				t.Fatalf("%s produced, not read", kafkajsRecord(i).Value)
			}
		}
	})
}
