package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
)

func TestConsumeFromTime(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	mustRun(t, srv, "", "topic", "create", "t")
	c, err := client.New(srv.URL(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	base := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	// One call per record: the server's time index finds a batch by its
	// largest timestamp, and --from starts at that batch.
	for i, v := range []string{"a", "b", "c", "d"} {
		rec := client.Record{Value: []byte(v), Timestamp: base.Add(time.Duration(i) * time.Minute)}
		if _, err := c.Produce(t.Context(), "t", []client.Record{rec}); err != nil {
			t.Fatal(err)
		}
	}
	r := mustRun(t, srv, "", "consume", "t", "--from", "2026-01-02T15:01:30Z")
	if r.stdout != "c\nd\n" {
		t.Fatalf("stdout = %q, want c and d", r.stdout)
	}
	r = mustRun(t, srv, "", "consume", "t", "--from", "2026-01-02T16:00:00+01:00", "--meta")
	if !strings.HasPrefix(r.stdout, "0:0\t2026-01-02T15:00:00Z\t-\ta\n") {
		t.Fatalf("stdout = %q", r.stdout)
	}
}

func TestConsumeFollowEndsAfterIdleTimeout(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	mustRun(t, srv, "", "topic", "create", "t", "-p", "3")
	mustRun(t, srv, "", "produce", "t", "x", "y")

	// Records produced while consume follows are printed too.
	fetching := make(chan struct{}, 16)
	for range 16 {
		srv.Intercept("Fetch", func(context.Context) error {
			fetching <- struct{}{}
			return nil
		})
	}
	done := make(chan cliResult, 1)
	go func() {
		done <- runCLI(t, srv, "", "consume", "t", "--follow", "--timeout", "300ms", "--from", "latest")
	}()
	<-fetching // the consumer is waiting at the end of a partition
	mustRun(t, srv, "", "produce", "t", "late", "--partition", "0")
	r := <-done
	if r.code != 0 || r.stdout != "late\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestConsumeFollowStopsAtMax(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	mustRun(t, srv, "", "topic", "create", "t", "-p", "2")
	mustRun(t, srv, "", "produce", "t", "1", "2", "3", "4", "5")
	r := mustRun(t, srv, "", "consume", "t", "--follow", "--max", "5")
	if got := strings.Count(r.stdout, "\n"); got != 5 {
		t.Fatalf("stdout = %q, want 5 lines", r.stdout)
	}
}

func TestConsumeSkipsAheadAfterRetention(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	// Each produce call writes its own segment (segment.bytes is tiny),
	// and retention keeps one byte: the cleaner deletes a and b.
	mustRun(t, srv, "", "topic", "create", "t", "--config", "segment.bytes=14", "--config", "retention.bytes=1")
	mustRun(t, srv, "", "produce", "t", "a", "b")
	mustRun(t, srv, "", "produce", "t", "c", "d")
	if err := srv.Clean(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, srv, "", "consume", "t", "--from", "0")
	if r.stdout != "c\nd\n" || !strings.Contains(r.stderr, "skipping to 2") {
		t.Fatalf("stdout %q, stderr %q", r.stdout, r.stderr)
	}
}

func TestProduceFromFile(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	mustRun(t, srv, "", "topic", "create", "t")
	path := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(path, []byte(numbers(30)), 0o600); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, srv, "", "produce", "t", "--file", path, "--batch", "8", "--progress")
	if !strings.Contains(r.stdout, "produced 30 records to t") {
		t.Fatalf("stdout = %q", r.stdout)
	}
	if got := srv.Calls("Produce"); got != 4 {
		t.Fatalf("Produce calls = %d, want 4 (batches of 8)", got)
	}
	r = mustRun(t, srv, "", "consume", "t", "--from", "29")
	if r.stdout != "29\n" {
		t.Fatalf("stdout = %q", r.stdout)
	}
}
