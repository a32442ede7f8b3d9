package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/logd-dev/logd/internal/e2e"
)

// TestLogctlBenchKafka: logctl bench produce and consume with --kafka
// drive the node's Kafka listener with franz-go, and what they report is
// what the node holds: the topic's end offsets add up to the records the
// produce benchmark counted, and the consume benchmark reads them all.
func TestLogctlBenchKafka(t *testing.T) {
	kaddr := e2e.FreeAddr(t)
	nd := e2e.StartNode(t, "--kafka-listen", kaddr)
	const n = 3000
	var got struct {
		Records int64 `json:"records"`
		Bytes   int64 `json:"bytes"`
	}
	out := e2e.Logctl(t, nd, "bench", "produce", "--kafka", kaddr, "--topic", "kb", "--partitions", "3",
		"--records", "3000", "--record-size", "16", "--records-per-call", "100", "--concurrency", "2", "--keep", "-o", "json")
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("bench produce -o json: %v\n%s", err, out)
	}
	if got.Records != n || got.Bytes != n*16 {
		t.Fatalf("bench produce over Kafka reported %+v, want %d records of 16 bytes", got, n)
	}
	var desc struct {
		Partitions []struct {
			End   int64 `json:"end_offset"`
			Start int64 `json:"log_start_offset"`
		} `json:"partition_state"`
	}
	out = e2e.Logctl(t, nd, "topic", "describe", "kb", "-o", "json")
	if err := json.Unmarshal([]byte(out), &desc); err != nil {
		t.Fatalf("topic describe -o json: %v\n%s", err, out)
	}
	var held int64
	for _, p := range desc.Partitions {
		held += p.End - p.Start
	}
	if held != n {
		t.Fatalf("the node holds %d records after the Kafka produce benchmark, want %d:\n%s", held, n, out)
	}
	out = e2e.Logctl(t, nd, "bench", "consume", "--kafka", kaddr, "--topic", "kb", "-o", "json")
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("bench consume -o json: %v\n%s", err, out)
	}
	if got.Records != n || got.Bytes != n*16 {
		t.Fatalf("bench consume over Kafka reported %+v, want %d records of 16 bytes", got, n)
	}
	if out := e2e.Logctl(t, nd, "topic", "list"); !strings.Contains(out, "kb") {
		t.Fatalf("--keep did not keep the topic:\n%s", out)
	}
}
