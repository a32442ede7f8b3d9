package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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

// TestRecordValuesPrintedAlike: consume and dlq list print a record's key,
// value and headers in the same form, in JSON and YAML: text when UTF-8,
// base64 flagged by *_encoding otherwise.
func TestRecordValuesPrintedAlike(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	mustRun(t, srv, "", "topic", "create", "jobs")
	mustRun(t, srv, "plain\n\xff\xfebin\n", "produce", "jobs", "--key", "k", "-H", "h=v")
	mustRun(t, srv, "", "queue", "create", "jobs", "w")
	claimed := mustRun(t, srv, "", "queue", "claim", "jobs", "w", "--max", "2", "-o", "json")
	for line := range strings.Lines(claimed.stdout) {
		var j struct{ Token string }
		if err := json.Unmarshal([]byte(line), &j); err != nil {
			t.Fatal(err)
		}
		mustRun(t, srv, "", "queue", "nack", "jobs", "w", j.Token, "--permanent")
	}
	type values struct {
		Key           *string `json:"key"`
		Value         *string `json:"value"`
		ValueEncoding string  `json:"value_encoding"`
		Headers       []struct {
			Key, Value string
		} `json:"headers"`
	}
	var consumed []values
	for line := range strings.Lines(mustRun(t, srv, "", "consume", "jobs", "-o", "json").stdout) {
		var v values
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatal(err)
		}
		consumed = append(consumed, v)
	}
	var dead []values
	if err := json.Unmarshal([]byte(mustRun(t, srv, "", "dlq", "list", "jobs", "w", "-o", "json").stdout), &dead); err != nil {
		t.Fatal(err)
	}
	want := []string{`{"k" "plain"  [{h v}]}`, `{"k" "//5iaW4=" base64 [{h v}]}`}
	for name, got := range map[string][]values{"consume": consumed, "dlq list": dead} {
		var s []string
		for _, v := range got {
			s = append(s, fmt.Sprintf("{%q %q %s %v}", *v.Key, *v.Value, v.ValueEncoding, v.Headers))
		}
		if !slices.Equal(s, want) {
			t.Errorf("%s -o json printed %v, want %v", name, s, want)
		}
	}
	for _, cmd := range [][]string{{"consume", "jobs", "-o", "yaml"}, {"dlq", "list", "jobs", "w", "-o", "yaml"}} {
		out := mustRun(t, srv, "", cmd...).stdout
		for _, want := range []string{`(?m)^ *value: plain$`, `(?m)^ *value: "?//5iaW4="?\n *value_encoding: base64$`, `(?m)^ *headers:\n *- key: h\n *value: v$`} {
			if !regexp.MustCompile(want).MatchString(out) {
				t.Errorf("%v printed\n%s\nwant %s", cmd, out, want)
			}
		}
	}
}

// TestProduceTombstone: produce --tombstone writes a null value under
// --key, which compaction keeps while it removes the key's earlier
// records; topic describe's OFFSETS column is end minus start, not a
// count of the records left.
func TestProduceTombstone(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	runGroupSteps(t, srv, []step{
		{args: args("topic create users -c cleanup.policy=compact -c segment.bytes=14 -c min.compaction.lag.ms=0 -c min.cleanable.dirty.ratio=0.01")},
		{args: args("produce users alice --key u1")},
		{args: args("produce users --key u1 --tombstone"), stdoutExact: "PARTITION  OFFSET\n0          1\n"},
		{args: args("produce users bob --key u2")},
		{args: args("produce users --tombstone"), wantCode: 2, stderr: []string{`--tombstone needs --key`}},
		{args: args("produce users x --key u1 --tombstone"), wantCode: 2, stderr: []string{`--tombstone writes a null value: give no values`}},
		{args: args("consume users -o json --partition 0 --from 1 --max 1"), stdout: []string{`^\{"topic":"users","partition":0,"offset":1,"timestamp":"[^"]+","key":"u1","value":null\}\n$`}},
	})
	if err := srv.Clean(t.Context()); err != nil {
		t.Fatal(err)
	}
	runGroupSteps(t, srv, []step{
		{args: args("consume users -o json"), stdout: []string{`^\{[^\n]*"offset":1,[^\n]*"key":"u1","value":null\}\n\{[^\n]*"offset":2,[^\n]*"value":"bob"\}\n$`}},
		{args: args("topic describe users"), stdout: []string{`(?m)^0\s+0\s+3\s+3\s+\d+(\.\d)? K?i?B\s+\d+\s+[1-9]\d*\s+compact \S+ -\d+(\.\d)? K?i?B -1 record$`}},
	})
}

// TestEmptyHeaderValue: -H k= writes an empty header value, which consume
// prints as "" (a null value would be null), in JSON and YAML.
func TestEmptyHeaderValue(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	mustRun(t, srv, "", "topic", "create", "events")
	mustRun(t, srv, "x\n", "produce", "events", "-H", "empty=", "-H", "k=v")
	out := mustRun(t, srv, "", "consume", "events", "-o", "json").stdout
	if want := `"headers":[{"key":"empty","value":""},{"key":"k","value":"v"}]`; !strings.Contains(out, want) {
		t.Errorf("consume -o json printed\n%s\nwant %s", out, want)
	}
	out = mustRun(t, srv, "", "consume", "events", "-o", "yaml").stdout
	if want := regexp.MustCompile(`(?m)^ *- key: empty\n *value: ""$`); !want.MatchString(out) {
		t.Errorf("consume -o yaml printed\n%s\nwant %s", out, want)
	}
}
