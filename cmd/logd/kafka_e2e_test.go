package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kcat returns the path of kcat (scripts/test-tools.sh installs it; make
// test runs that first). Without it the test skips, except under CI=true,
// where a missing tool is a broken setup and fails.
func kcat(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("kcat is not installed: scripts/test-tools.sh installs it (make test runs it)")
		}
		t.Skip("kcat is not installed: run scripts/test-tools.sh (make test does) to run this test")
	}
	return p
}

// runKcat runs kcat with args and returns its stdout.
func runKcat(t *testing.T, ctx context.Context, bin string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, tail(stderr.String(), 2000))
	}
	return stdout.String()
}

// TestKafkaKcat runs kcat, librdkafka's command line client, against the
// built logd: -L lists the broker and the topic, -P writes every line of a
// file of 10,000 records (100,000 in make fault), -C from the beginning to
// the end reads every one of them back, once, and logd's own API reads the
// same records.
func TestKafkaKcat(t *testing.T) {
	bin := kcat(t)
	n := 10_000
	if faultLong() {
		n = 100_000
	}
	kaddr := freeAddr(t)
	nd := startNode(t, "--kafka-listen", kaddr)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	createTopic(t, ctx, nd, "kcat", 3, nil)

	meta := runKcat(t, ctx, bin, "-b", kaddr, "-L", "-t", "kcat")
	for _, want := range []string{"broker 1 at " + kaddr + " (controller)", `topic "kcat" with 3 partitions`, "partition 2, leader 1, replicas: 1, isrs: 1"} {
		if !strings.Contains(meta, want) {
			t.Fatalf("kcat -L lacks %q:\n%s", want, meta)
		}
	}

	file := filepath.Join(t.TempDir(), "records.txt")
	var sb strings.Builder
	want := map[string]bool{}
	for i := range n {
		v := fmt.Sprintf("record-%06d", i)
		want[v] = true
		sb.WriteString(v)
		sb.WriteByte('\n')
	}
	if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	runKcat(t, ctx, bin, "-b", kaddr, "-P", "-t", "kcat", "-l", file)
	produced := time.Since(start)

	start = time.Now()
	out := runKcat(t, ctx, bin, "-b", kaddr, "-C", "-t", "kcat", "-o", "beginning", "-e", "-q", "-f", "%s\n")
	consumed := time.Since(start)
	got := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if got[line] {
			t.Fatalf("kcat -C read %q twice", line)
		}
		if !want[line] {
			t.Fatalf("kcat -C read %q, never produced", line)
		}
		got[line] = true
	}
	if len(got) != n {
		t.Fatalf("kcat -C read %d of %d records", len(got), n)
	}
	t.Logf("kcat: %d records produced in %v, consumed in %v (under shared load)", n, produced, consumed)

	// The same records through logd's own API.
	total := 0
	for _, recs := range nd.readAll(ctx, "kcat", 3) {
		for _, r := range recs {
			if !want[string(r.Value)] {
				t.Fatalf("logd's API read %q", r.Value)
			}
		}
		total += len(recs)
	}
	if total != n {
		t.Fatalf("logd's API read %d of %d records", total, n)
	}
}
