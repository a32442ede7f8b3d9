package main

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/internal/e2e"
)

// benchSystemRows are the one-node rows of scripts/bench-system.sh's
// table, each named by the start of its workload column.
var benchSystemRows = []string{
	"produce 128 B, 4 calls x 5000",
	"consume 128 B",
	"produce 1 KiB",
	"produce 128 B, 1 client x 500 in flight",
	"queue claim+ack",
	"p99 at half of peak",
	"hold ",
}

// TestBenchSystemScript runs scripts/bench-system.sh (make bench-system)
// over one node with tiny counts and checks that its table has every
// one-node row, each with a number in every column: the script's parsing
// of logctl bench's JSON and of /proc stays in step with them. It asserts
// no figure.
func TestBenchSystemScript(t *testing.T) {
	if !e2e.FaultLong() {
		t.Skip("a pass of bench-system.sh takes about 30 s; it runs under LOGD_FAULT_LONG=1 (make fault)")
	}
	for _, tool := range []string{"bash", "curl", "jq", "column"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s: %v", tool, err)
			}
			t.Skipf("%s: %v", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := []string{
		"LOGD_BIN=" + e2e.Logd(), "LOGCTL_BIN=" + e2e.LogctlBinary(t),
		"BENCH_TMP=" + t.TempDir(), "TMPDIR=" + t.TempDir(),
		"QUICK=1", "NODES=1", "PEERS=0", "RUN_TIMEOUT=60",
		"RECORDS_128=20000", "RECORDS_1K=4000", "RECORDS_ONE=2000",
		"RECORDS_QUEUE=2000", "RECORDS_HOLD=20000", "P99_SECONDS=1",
		// A single node alone calls no election (as the harness's nodes).
		"LOGD_ARGS=--raft-heartbeat-timeout 50ms",
	}
	out, err := script(ctx, env, "bench-system.sh")
	if err != nil {
		t.Fatalf("bench-system.sh: %v\n%s", err, out)
	}
	number := regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)
	rss := regexp.MustCompile(`^[0-9]+/[0-9]+$`)
	for _, name := range benchSystemRows {
		var cols []string
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, name) && strings.Count(line, " | ") == 6 {
				cols = strings.Split(line, " | ")
				break
			}
		}
		if cols == nil {
			t.Errorf("no row %q in the table:\n%s", name, out)
			continue
		}
		for i, c := range cols[1:6] {
			c = strings.TrimSpace(c)
			if !number.MatchString(c) {
				t.Errorf("row %q column %d is %q, not a number", name, i+2, c)
			}
		}
		if rate, _ := strconv.ParseFloat(strings.TrimSpace(cols[1]), 64); rate <= 0 {
			t.Errorf("row %q: rate %q", name, cols[1])
		}
		if c := strings.TrimSpace(cols[6]); !rss.MatchString(c) {
			t.Errorf("row %q: RSS %q, not MB/MB", name, c)
		}
	}
	for _, want := range []string{"cores (nproc): ", "fdatasync", "restart holding"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the output:\n%s", want, out)
		}
	}
}
