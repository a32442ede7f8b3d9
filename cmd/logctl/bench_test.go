package main

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
)

func TestBenchProduceThenConsume(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	r := mustRun(t, srv, "", "bench", "produce", "--topic", "b", "--partitions", "3", "--records", "2500",
		"--records-per-call", "100", "--concurrency", "4", "--record-size", "10", "--progress", "--keep")
	for _, p := range []string{`(?m)^records\s+2500$`, `(?m)^records/s\s+\d+$`, `(?m)^MB/s\s+[\d.]+$`, `(?m)^calls\s+25$`, `(?m)^latency p999\s+[\d.]+ ms$`} {
		if !regexp.MustCompile(p).MatchString(r.stdout) {
			t.Fatalf("bench produce output does not match %q:\n%s", p, r.stdout)
		}
	}
	if !regexp.MustCompile(`created topic b with 3 partitions(.|\n)*kept topic b \(--keep\)`).MatchString(r.stderr) {
		t.Fatalf("stderr = %q", r.stderr)
	}

	// The server counts the batch bytes it serves to a fetch of batches
	// (the default), and the key and value bytes of a fetch of records.
	var j benchJSON
	for _, tc := range []struct {
		flags   []string
		batches bool
	}{{batches: true}, {flags: []string{"--records-mode"}}} {
		before, err := srv.Metric("logd_record_bytes_total", "op", "fetch")
		if err != nil {
			t.Fatal(err)
		}
		r = mustRun(t, srv, "", append([]string{"bench", "consume", "--topic", "b", "--concurrency", "7", "--records-per-call", "64", "-o", "json"}, tc.flags...)...)
		if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
			t.Fatalf("unmarshal %q: %v", r.stdout, err)
		}
		if j.Records != 2500 || j.Bytes != 25000 || j.Calls == 0 || j.RecordsPerSec <= 0 {
			t.Fatalf("bench consume %v = %+v", tc.flags, j)
		}
		after, err := srv.Metric("logd_record_bytes_total", "op", "fetch")
		if err != nil {
			t.Fatal(err)
		}
		if served := after - before; (served > 25000) != tc.batches {
			t.Errorf("bench consume %v: the server counted %v fetched bytes; batches %v", tc.flags, served, tc.batches)
		}
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
	if regexp.MustCompile(`deleted topic`).MatchString(r.stderr) {
		t.Fatalf("bench produce deleted a topic it did not create: %q", r.stderr)
	}

	// --slow lists the calls slower than it (here: every call) on stderr.
	r = mustRun(t, srv, "", "bench", "produce", "--topic", "b", "--records", "200",
		"--records-per-call", "50", "--concurrency", "2", "--slow", "1ns")
	if n := len(regexp.MustCompile(`(?m)^slow call: start \d\d:\d\d:\d\d\.\d{3} took [\d.]+ ms \(50 records\)$`).FindAllString(r.stderr, -1)); n != 4 {
		t.Fatalf("--slow 1ns listed %d calls of 4:\n%s", n, r.stderr)
	}
}

// TestBenchCleansUp: the benchmarks delete the topics they created (bench
// queue's dead-letter topic too), also when they fail, and --keep keeps
// them.
func TestBenchCleansUp(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	topics := func() string {
		t.Helper()
		return mustRun(t, srv, "", "topic", "list", "-o", "json").stdout
	}
	r := mustRun(t, srv, "", "bench", "produce", "--topic", "p", "--records", "100", "--compare-keys", "1")
	if !regexp.MustCompile(`(?m)deleted topic p-keyed, created for the benchmark \(--keep keeps it\)\n.*deleted topic p, `).MatchString(r.stderr) {
		t.Fatalf("stderr %q", r.stderr)
	}
	mustRun(t, srv, "", "bench", "queue", "--topic", "q", "--records", "50", "--workers", "2", "--batch", "10", "--partitions", "1")
	if got := topics(); got != "[]\n" {
		t.Fatalf("topics left behind: %s", got)
	}
	// A run that fails still deletes what it created.
	srv.FailNext("Claim", logdtest.Error(connect.CodeInvalidArgument, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_INVALID_ARGUMENT}, "injected"))
	r = runCLI(t, srv, "", "bench", "queue", "--topic", "q", "--records", "50", "--workers", "1", "--batch", "10", "--partitions", "1")
	if r.code != 1 || !regexp.MustCompile(`injected`).MatchString(r.stderr) {
		t.Fatalf("bench queue with a failing claim: exit %d, stderr %q", r.code, r.stderr)
	}
	if got := topics(); got != "[]\n" {
		t.Fatalf("topics left behind by a failed run: %s", got)
	}
	mustRun(t, srv, "", "bench", "queue", "--topic", "q", "--records", "50", "--workers", "2", "--batch", "10", "--partitions", "1", "--keep")
	if got := topics(); !regexp.MustCompile(`"name": "q"(.|\n)*"name": "q.bench.dlq"`).MatchString(got) {
		t.Fatalf("--keep: topics %s", got)
	}
}

func TestBenchConsumeEmptyTopicFails(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
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

func TestBenchCompareKeys(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	r := mustRun(t, srv, "", "bench", "produce", "--topic", "cmp", "--partitions", "2", "--compare-keys", "3",
		"--records", "300", "--records-per-call", "50", "--concurrency", "2", "-o", "json", "--keep")
	var s compareSummary
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("unmarshal %q: %v", r.stdout, err)
	}
	if len(s.Rounds) != 3 {
		t.Fatalf("%d rounds, want 3", len(s.Rounds))
	}
	var changes []float64
	for i, rd := range s.Rounds {
		if rd.KeyedFirst != (i%2 == 1) {
			t.Errorf("round %d: keyed first = %v; the order must alternate", i+1, rd.KeyedFirst)
		}
		if rd.Plain.Records != 300 || rd.Keyed.Records != 300 || rd.Plain.RecordsPerSec <= 0 || rd.Keyed.RecordsPerSec <= 0 {
			t.Errorf("round %d: %+v", i+1, rd)
		}
		if want := rd.Keyed.RecordsPerSec/rd.Plain.RecordsPerSec - 1; math.Abs(rd.Change-want) > 1e-9 {
			t.Errorf("round %d: change %v, want %v", i+1, rd.Change, want)
		}
		changes = append(changes, rd.Change)
	}
	if mean, ci := meanCI95(changes); math.Abs(s.Change-mean) > 1e-9 || math.Abs(s.ChangeCI95-ci) > 1e-9 || ci <= 0 {
		t.Fatalf("summary change %v ± %v, want %v ± %v", s.Change, s.ChangeCI95, mean, ci)
	}
	// Warm-up and 3 rounds: 4 runs of 300 records on each topic, keyed
	// ones on their own topic.
	for topic, want := range map[string]string{"cmp": "1200", "cmp-keyed": "1200"} {
		d := mustRun(t, srv, "", "topic", "describe", topic, "-o", "json")
		if !regexp.MustCompile(`"end_offset":\s*\d+`).MatchString(d.stdout) {
			t.Fatalf("describe %s: %s", topic, d.stdout)
		}
		total := 0
		for _, m := range regexp.MustCompile(`"end_offset":\s*(\d+)`).FindAllStringSubmatch(d.stdout, -1) {
			var n int
			fmt.Sscan(m[1], &n)
			total += n
		}
		if fmt.Sprint(total) != want {
			t.Errorf("topic %s holds %d records, want %s", topic, total, want)
		}
	}

	text := mustRun(t, srv, "", "bench", "produce", "--topic", "cmp", "--compare-keys", "2", "--records", "100", "--records-per-call", "50")
	for _, p := range []string{`(?m)^ROUND\s+FIRST\s+WITHOUT KEYS rec/s\s+WITH KEYS rec/s\s+CHANGE$`, `(?m)^1\s+without keys\s+\d+\s+\d+\s+[+-]\d+\.\d%$`,
		`(?m)^2\s+with keys\s+\d+\s+\d+\s+[+-]\d+\.\d%$`, `(?m)^mean\s+\d+\s+\d+\s+[+-]\d+\.\d% ± \d+\.\d% \(95%\)$`} {
		if !regexp.MustCompile(p).MatchString(text.stdout) {
			t.Fatalf("compare output does not match %q:\n%s", p, text.stdout)
		}
	}

	for _, bad := range [][]string{{"--idempotency-keys"}, {"--duration", "1s"}, {"--rate", "100"}} {
		args := append([]string{"bench", "produce", "--topic", "cmp", "--compare-keys", "2"}, bad...)
		if r := runCLI(t, srv, "", args...); r.code != exitUsage || !regexp.MustCompile(`--compare-keys runs --records`).MatchString(r.stderr) {
			t.Errorf("%v: exit %d, stderr %q", bad, r.code, r.stderr)
		}
	}
}

func TestMeanCI95(t *testing.T) {
	mean, half := meanCI95([]float64{1, 2, 3, 4, 5})
	// sd = sqrt(2.5), se = sd/sqrt(5) = 0.7071, t(4) = 2.776.
	if math.Abs(mean-3) > 1e-12 || math.Abs(half-2.776*math.Sqrt(0.5)) > 1e-9 {
		t.Fatalf("meanCI95 = %v ± %v, want 3 ± %v", mean, half, 2.776*math.Sqrt(0.5))
	}
	if m, h := meanCI95([]float64{-0.07}); m != -0.07 || h != 0 {
		t.Fatalf("one round: %v ± %v", m, h)
	}
}

// TestBenchProducer: --producer sends every record through the client's
// Producer, one per worker at a time, and the topic holds them all;
// flags of the call-based run are refused with it.
func TestBenchProducer(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	r := mustRun(t, srv, "", "bench", "produce", "--producer", "--topic", "p", "--partitions", "2", "--records", "300",
		"--concurrency", "8", "--record-size", "10", "--keep", "-o", "json")
	var j benchJSON
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
		t.Fatalf("unmarshal %q: %v", r.stdout, err)
	}
	if j.Records != 300 || j.Bytes != 3000 || j.RecordsPerSec <= 0 {
		t.Fatalf("bench produce --producer = %+v", j)
	}
	// One batch per partition at a time, and pipelined without a linger.
	for _, args := range [][]string{{"--max-in-flight", "1"}, {"--linger", "0"}} {
		mustRun(t, srv, "", append([]string{"bench", "produce", "--producer", "--topic", "p", "--records", "100", "--concurrency", "8", "--record-size", "10", "--keep", "-o", "json"}, args...)...)
	}
	r = mustRun(t, srv, "", "bench", "consume", "--topic", "p", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
		t.Fatalf("unmarshal %q: %v", r.stdout, err)
	}
	if j.Records != 500 {
		t.Fatalf("the topic holds %d records, want 500", j.Records)
	}
	for _, args := range [][]string{
		{"--producer", "--rate", "100"},
		{"--producer", "--records-per-call", "10"},
		{"--linger", "1ms"},
		{"--max-in-flight", "1"},
		{"--kafka-idempotent=false"}, // the Kafka producer's, without --kafka
	} {
		r := runCLI(t, srv, "", append([]string{"bench", "produce", "--topic", "p", "--records", "10"}, args...)...)
		if r.code != 2 {
			t.Errorf("bench produce %v: exit %d, stderr %q; want a usage error", args, r.code, r.stderr)
		}
	}
}

// TestBenchE2E: bench e2e reads back every record it produced, on a
// schedule, with a latency per record; bad flags are usage errors.
func TestBenchE2E(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	r := mustRun(t, srv, "", "bench", "e2e", "--partitions", "2", "--rate", "400", "--records-per-call", "10",
		"--duration", "500ms", "--record-size", "16", "-o", "json")
	var j benchJSON
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
		t.Fatalf("unmarshal %q: %v", r.stdout, err)
	}
	// 400 records/s for 0.5 s in calls of 10: about 200, never more.
	if j.Records == 0 || j.Records > 210 || j.Bytes != j.Records*16 || j.Calls != int(j.Records) {
		t.Fatalf("bench e2e = %+v", j)
	}
	for _, args := range [][]string{
		{"--record-size", "4"},
		{"--rate", "0"},
		{"--duration", "0s"},
	} {
		if r := runCLI(t, srv, "", append([]string{"bench", "e2e"}, args...)...); r.code != 2 {
			t.Errorf("bench e2e %v: exit %d, stderr %q; want a usage error", args, r.code, r.stderr)
		}
	}
}
