package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/client/clienttest"
)

func TestBenchProduceThenConsume(t *testing.T) {
	srv := clienttest.Start(t)
	r := mustRun(t, srv, "", "bench", "produce", "--topic", "b", "--partitions", "3", "--records", "2500",
		"--records-per-call", "100", "--concurrency", "4", "--record-size", "10", "--progress")
	for _, p := range []string{`(?m)^records\s+2500$`, `(?m)^records/s\s+\d+$`, `(?m)^MB/s\s+[\d.]+$`, `(?m)^calls\s+25$`, `(?m)^latency p999\s+[\d.]+ ms$`} {
		if !regexp.MustCompile(p).MatchString(r.stdout) {
			t.Fatalf("bench produce output does not match %q:\n%s", p, r.stdout)
		}
	}
	if !regexp.MustCompile(`created topic b with 3 partitions`).MatchString(r.stderr) {
		t.Fatalf("stderr = %q", r.stderr)
	}

	r = mustRun(t, srv, "", "bench", "consume", "--topic", "b", "--concurrency", "7", "--records-per-call", "64", "-o", "json")
	var j benchJSON
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
		t.Fatalf("unmarshal %q: %v", r.stdout, err)
	}
	if j.Records != 2500 || j.Bytes != 25000 || j.Calls == 0 || j.RecordsPerSec <= 0 {
		t.Fatalf("bench consume = %+v", j)
	}

	// Reuses the existing topic; bounded by --duration with a --rate.
	r = mustRun(t, srv, "", "bench", "produce", "--topic", "b", "--duration", "300ms", "--rate", "2000",
		"--records-per-call", "50", "--concurrency", "2", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
		t.Fatalf("unmarshal %q: %v", r.stdout, err)
	}
	// 2000 records/s for 0.3s in calls of 50: about 12 calls, never many more.
	if j.Records == 0 || j.Records > 1000 {
		t.Fatalf("rate-limited bench produced %d records", j.Records)
	}
}

func TestBenchConsumeEmptyTopicFails(t *testing.T) {
	srv := clienttest.Start(t)
	mustRun(t, srv, "", "topic", "create", "e")
	r := runCLI(t, srv, "", "bench", "consume", "--topic", "e")
	if r.code != 1 || !regexp.MustCompile(`has no records`).MatchString(r.stderr) {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestSplitRanges(t *testing.T) {
	parts := []client.PartitionInfo{
		{Partition: 0, LogStart: 10, End: 20},
		{Partition: 1, LogStart: 0, End: 0},
		{Partition: 2, LogStart: 0, End: 3},
	}
	tests := []struct {
		name    string
		workers int
		want    []offsetRange
	}{
		{name: "one per partition", workers: 1, want: []offsetRange{{0, 10, 20}, {2, 0, 3}}},
		{name: "split", workers: 4, want: []offsetRange{{0, 10, 15}, {0, 15, 20}, {2, 0, 1}, {2, 1, 3}}},
		{name: "no more ranges than records", workers: 20, want: []offsetRange{
			{0, 10, 11}, {0, 11, 12}, {0, 12, 13}, {0, 13, 14}, {0, 14, 15}, {0, 15, 16}, {0, 16, 17}, {0, 17, 18}, {0, 18, 19}, {0, 19, 20},
			{2, 0, 1}, {2, 1, 2}, {2, 2, 3},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := splitRanges(parts, tt.workers)
			if len(got) != len(tt.want) {
				t.Fatalf("splitRanges = %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("splitRanges = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	var ds []time.Duration
	for i := 1000; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	got := summarize(ds)
	want := latencySummary{Calls: 1000, P50: 500 * time.Millisecond, P99: 990 * time.Millisecond, P999: 999 * time.Millisecond, Max: time.Second}
	if got != want {
		t.Fatalf("summarize = %+v, want %+v", got, want)
	}
	if got := summarize(nil); got != (latencySummary{}) {
		t.Fatalf("summarize(nil) = %+v", got)
	}
}

// TestSetBenchKeys: bench produce --idempotency-keys gives every record its
// own key, also when its scratch is reused for the next call.
func TestSetBenchKeys(t *testing.T) {
	var (
		buf  []byte
		ends []int
		seen = map[string]bool{}
	)
	for call := range 3 {
		recs := make([]client.Record, 4-call)
		buf, ends = setBenchKeys(recs, "p-", int64(10*call), buf, ends)
		for i, r := range recs {
			if want := fmt.Sprintf("p-%d", 10*call+i); r.IdempotencyKey != want {
				t.Fatalf("call %d record %d: key %q, want %q", call, i, r.IdempotencyKey, want)
			}
			if seen[r.IdempotencyKey] {
				t.Fatalf("key %q given twice", r.IdempotencyKey)
			}
			seen[r.IdempotencyKey] = true
		}
	}
	if len(seen) != 4+3+2 {
		t.Fatalf("%d keys, want 9", len(seen))
	}
}
