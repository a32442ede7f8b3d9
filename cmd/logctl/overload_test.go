package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
)

// fullQueue starts a node with topic jobs whose queue group w is at its
// backlog bound of one record: every produce to jobs is refused with
// OVERLOADED and, since nothing drained, a retry-after of 1s.
func fullQueue(t *testing.T) *logdtest.Server {
	t.Helper()
	srv := logdtest.Start(t, logdtest.Options{})
	mustRun(t, srv, "", "topic", "create", "jobs", "--config", "queue.max.backlog.records=1")
	mustRun(t, srv, "", "queue", "create", "jobs", "w")
	mustRun(t, srv, "", "produce", "jobs", "job-1")
	return srv
}

// TestOverloadedProduce: a produce refused by a real node's admission
// control says the server's retry-after, and --max-overload-wait decides
// whether logctl fails at once or waits; the calls the node saw, not the
// time taken, show which.
func TestOverloadedProduce(t *testing.T) {
	srv := fullQueue(t)
	tests := []struct {
		name   string
		args   string
		calls  int // Produce calls the node sees; 0: at least 2, as the message says
		stderr string
	}{
		{name: "fail at once", args: "produce jobs job-2 --max-overload-wait 0", calls: 1,
			stderr: `^logctl: produce to "jobs": .*backlog of 1 record; .* \(not applied: server overloaded: retry after 1s\)\n$`},
		{name: "fail at once whatever --max-retry-time says", args: "produce jobs job-2 --max-overload-wait 0 --max-retry-time 1m", calls: 1,
			stderr: `\(not applied: server overloaded: retry after 1s\)\n$`},
		{name: "retries off", args: "produce jobs job-2 --max-retry-time 0", calls: 1,
			stderr: `\(not applied: server overloaded: retry after 1s; --max-overload-wait sets how long logctl waits\)\n$`},
		{name: "a retry-after longer than the wait: no retry", args: "produce jobs job-2 --max-overload-wait 500ms", calls: 1,
			stderr: `\(not applied: server overloaded: retry after 1s; --max-overload-wait sets how long logctl waits\)\n$`},
		// The first wait (1s plus up to 0.5s of jitter) fits in 2s, a
		// second one might: the message counts the retries made.
		{name: "waited, then gave up; -v logs each retry", args: "-v produce jobs job-2 --max-overload-wait 2s --max-retry-time 0",
			stderr: `(?s)^(logctl: Produce attempt \d failed, retrying in \S+: .*backlog.*\n)+logctl: produce to "jobs": .*\(not applied: server overloaded: retry after 1s; logctl waited \S+ over \d retr(y|ies); --max-overload-wait sets how long logctl waits\)\n$`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := srv.Calls("Produce")
			r := runCLI(t, srv, "", strings.Fields(tt.args)...)
			calls := srv.Calls("Produce") - before
			if r.code != exitRetryable {
				t.Fatalf("logctl %s: exit %d, want 4; stderr %q", tt.args, r.code, r.stderr)
			}
			if tt.calls > 0 && calls != tt.calls {
				t.Fatalf("logctl %s: the node saw %d Produce calls, want %d; stderr %q", tt.args, calls, tt.calls, r.stderr)
			}
			if !regexp.MustCompile(tt.stderr).MatchString(r.stderr) {
				t.Fatalf("logctl %s: stderr %q, want %q", tt.args, r.stderr, tt.stderr)
			}
			if tt.calls == 0 {
				// Each retry was logged (-v) and counted in the message.
				retries := strings.Count(r.stderr, "logctl: Produce attempt")
				said := fmt.Sprintf("over %d retries;", retries)
				if retries == 1 {
					said = "over 1 retry;"
				}
				if calls < 2 || retries != calls-1 || !strings.Contains(r.stderr, said) {
					t.Fatalf("logctl %s: %d calls, %d logged retries; stderr %q", tt.args, calls, retries, r.stderr)
				}
			}
		})
	}
}

// TestOverloadedProduceJSON: under -o json the refusal is one object
// with the exit code, the server's reason and its retry-after.
func TestOverloadedProduceJSON(t *testing.T) {
	srv := fullQueue(t)
	r := runCLI(t, srv, "", "produce", "jobs", "job-2", "--max-overload-wait", "0", "-o", "json")
	if r.code != exitRetryable || srv.Calls("Produce") != 2 {
		t.Fatalf("exit %d after %d Produce calls (1 before), want 4 after 2; stderr %q", r.code, srv.Calls("Produce"), r.stderr)
	}
	var got map[string]map[string]any
	if err := json.Unmarshal([]byte(r.stderr), &got); err != nil || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("stderr %q is not one JSON object on one line: %v", r.stderr, err)
	}
	e := got["error"]
	msg, _ := e["message"].(string)
	if len(got) != 1 || e["code"] != float64(4) || e["reason"] != "OVERLOADED" || e["retry_after_ms"] != float64(1000) ||
		!strings.Contains(msg, "backlog of 1 record;") || len(e) != 4 {
		t.Fatalf("error object %v", got)
	}
}

// TestOverloadWaitOutlivesRetryTime: with --max-overload-wait, a produce
// refused for overload is retried after its retry-after even with
// --max-retry-time 0, and succeeds once the backlog drains.
func TestOverloadWaitOutlivesRetryTime(t *testing.T) {
	srv := fullQueue(t)
	before := srv.Calls("Produce")
	var (
		wg sync.WaitGroup
		r  cliResult
	)
	wg.Go(func() {
		r = runCLI(t, srv, "", "produce", "jobs", "job-2", "--max-overload-wait", "1m", "--max-retry-time", "0")
	})
	// Drain the backlog once the produce was refused.
	deadline := time.Now().Add(10 * time.Second)
	for srv.Calls("Produce") == before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	var claimed struct{ Token string }
	if err := json.Unmarshal([]byte(mustRun(t, srv, "", "queue", "claim", "jobs", "w", "-o", "json").stdout), &claimed); err != nil {
		t.Fatal(err)
	}
	mustRun(t, srv, "", "queue", "ack", "jobs", "w", claimed.Token)
	wg.Wait()
	if r.code != exitOK || srv.Calls("Produce")-before < 2 {
		t.Fatalf("exit %d after %d Produce calls, want 0 after a refusal and a retry; stderr %q", r.code, srv.Calls("Produce")-before, r.stderr)
	}
	if r.stderr != "" {
		t.Fatalf("stderr %q: the wait is shown only on a terminal", r.stderr)
	}
}

// fakeNow is a clock the test moves; safe for the drawing goroutine.
type fakeNow struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeNow) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeNow) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// waitFor polls cond until it holds, failing the test after 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestOverloadWaitLine: on a terminal a wait is one line redrawn in place
// (the server's retry-after, the attempt, the time waited, the time to the
// next attempt), erased when the wait ends and before the command's own
// output; elsewhere nothing is drawn, and every wait is counted.
func TestOverloadWaitLine(t *testing.T) {
	refused := client.RetryEvent{Method: "Produce", Attempt: 2, Delay: 800 * time.Millisecond, Elapsed: 1200 * time.Millisecond,
		Err: &client.OverloadedError{RetryAfter: time.Second}}

	t.Run("terminal", func(t *testing.T) {
		var out syncBuffer
		clock := &fakeNow{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		s := newOverloadWaits(&out, true)
		s.now, s.interval = clock.Now, time.Millisecond
		defer s.Close()
		s.retry(client.RetryEvent{Method: "Produce", Attempt: 1, Delay: time.Second, Err: client.ErrUnavailable}) // not an overload: ignored
		s.retry(refused)
		first := "\rlogctl: server overloaded: retry after 1s; attempt 2 refused, waited 1.2s, next attempt in 800ms\x1b[K"
		if got := out.String(); !regexp.MustCompile(`^(` + regexp.QuoteMeta(first) + `)+$`).MatchString(got) {
			t.Fatalf("first frames %q, want %q", got, first)
		}
		clock.Advance(300 * time.Millisecond)
		waitFor(t, "a redrawn frame", func() bool {
			return strings.HasSuffix(out.String(), "\rlogctl: server overloaded: retry after 1s; attempt 2 refused, waited 1.5s, next attempt in 500ms\x1b[K")
		})
		clock.Advance(500 * time.Millisecond)
		waitFor(t, "the line erased", func() bool { return strings.HasSuffix(out.String(), "\r\x1b[K") })

		// A new wait, then the command's output on the same terminal:
		// the line is erased first.
		s.retry(refused)
		eraseFirst{w: &out, s: s}.Write([]byte("PARTITION  OFFSET\n"))
		if got := out.String(); !strings.Contains(got, "next attempt in 800ms\x1b[K\r\x1b[KPARTITION  OFFSET\n") {
			t.Fatalf("output during a wait does not erase the line first: %q", got)
		}
		s.Close()
		if n, waited := s.waits(); n != 2 || waited != 1600*time.Millisecond {
			t.Fatalf("waits() = %d, %v; want 2, 1.6s", n, waited)
		}
		// Still in the wait, the line may have been drawn again: Close
		// erased it.
		if got := out.String(); !strings.HasSuffix(got, "\r\x1b[K") && !strings.HasSuffix(got, "OFFSET\n") {
			t.Fatalf("not erased at the end: %q", got)
		}
	})

	t.Run("not a terminal", func(t *testing.T) {
		var out syncBuffer
		s := newOverloadWaits(&out, false)
		s.retry(refused)
		s.Close()
		if out.String() != "" {
			t.Fatalf("drew %q where stderr is not a terminal", out.String())
		}
		if n, waited := s.waits(); n != 1 || waited != 800*time.Millisecond {
			t.Fatalf("waits() = %d, %v; want 1, 800ms", n, waited)
		}
	})

	t.Run("beside a progress report", func(t *testing.T) {
		// The report owns the line: it tells of the wait at its end.
		var out syncBuffer
		clock := &fakeNow{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		s := newOverloadWaits(&out, true)
		s.now = clock.Now
		opts := &globalOpts{stderr: &out, overload: s}
		p := opts.newProgress(true, 0, "records")
		p.Start()
		s.retry(refused)
		clock.Advance(300 * time.Millisecond)
		p.Stop()
		s.Close()
		if got := out.String(); strings.Contains(got, "\r") || !regexp.MustCompile(`^0 records  .*  \(server overloaded: retry after 1s; next attempt in 500ms\)\n$`).MatchString(got) {
			t.Fatalf("progress during a wait: %q", got)
		}
	})

	t.Run("verbose", func(t *testing.T) {
		var out syncBuffer
		s := newOverloadWaits(&out, true)
		s.quiet()
		s.retry(refused)
		s.Close()
		if out.String() != "" {
			t.Fatalf("drew %q under -v, which prints each retry instead", out.String())
		}
	})
}
