package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/logdtest"
)

// TestQueueCLI runs queue and dlq commands against a real node. A delivery
// token is "PARTITION.OFFSET.DELIVERY.TAG" with a tag the script cannot
// know, so it names a token {PARTITION.OFFSET.DELIVERY} (see tokenScript).
func TestQueueCLI(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "claim ack nack extend and dead letters",
			steps: []step{
				{args: args("topic create jobs")},
				{args: args("produce jobs"), stdin: "alice:10\nbob:20\ncarol:-3\n"},
				{args: args("queue create jobs w --lease 1m --max-deliveries 2 --backoff-base 1s --backoff-max 1m"), stdout: []string{
					`^created queue group w on jobs\n`, `(?m)^Lease:\s+1m$`, `(?m)^Max deliveries:\s+2$`, `(?m)^Dead-letter topic:\s+jobs.w.dlq$`}},
				{args: args("queue create jobs w"), wantCode: 1, stderr: []string{`already exists`}},
				{args: args("queue create nope w"), wantCode: 3, stderr: []string{`unknown topic: "nope"`}},
				{args: args("queue claim jobs w --max 2 --worker billing-7 -o json"), stdout: []string{
					`(?m)^\{"topic":"jobs","group":"w","partition":0,"offset":0,.*"value":"alice:10".*"token":"{0.0.1}","delivery":1,`,
					`(?m)^\{.*"offset":1,.*"token":"{0.1.1}","delivery":1,`}},
				// PARTITION READY IN-FLIGHT DELAYED ACKED DEAD-LETTERED DONE END
				{args: args("queue describe jobs w"), stdout: []string{`(?m)^0\s+1\s+2\s+0\s+0\s+0\s+0\s+3\s+`, `State: running`,
					`(?m)^Backlog: 3 records, 22 B \(exact\); oldest unfinished \S+ \(no age bound\); drain 0.0 records/s$`}},
				{args: args("queue describe jobs w --in-flight -o json"), stdout: []string{`"backlog_records": 3`, `"backlog_bytes": 22`, `"backlog_bytes_exact": true`,
					`"max_backlog_age_ms": -1`, `"oldest_unfinished_age_ms": \d+`, `"worker": "billing-7"`, `"lease_deadline": "\d{4}-`}},
				{args: args("queue describe jobs w --in-flight"), stdout: []string{`(?m)^In flight: 2 records$`,
					`(?m)^PARTITION\s+OFFSET\s+WORKER\s+DELIVERY\s+CLAIMED\s+LEASE UNTIL\s+EXTENDED$`,
					`(?m)^0\s+0\s+billing-7\s+1\s+\S+\s+\S+\s+0$`, `(?m)^0\s+1\s+billing-7\s+1\s+`}},
				{args: args("queue extend jobs w {0.0.1} --lease 2m"), stdout: []string{`(?m)^TOKEN\s+RESULT\s+DETAIL$`, `(?m)^{0.0.1}\s+ok\s+lease until \d{4}-`}},
				{args: args("queue ack jobs w {0.0.1}"), stdout: []string{`(?m)^{0.0.1}\s+ok\s*$`}},
				{args: args("queue ack jobs w {0.0.1} -o json"), stdout: []string{`"result": "duplicate"`}},
				// A transient nack with no delay offers the record again at once.
				{args: args("queue nack jobs w {0.1.1} --delay 0s --reason db-down"), stdout: []string{`(?m)^{0.1.1}\s+ok\s+available at \d{4}-`}},
				// The nacked delivery's token is no longer live.
				{args: args("queue ack jobs w {0.1.1}"), wantCode: 1, stderr: []string{`^logctl: .*stale`}},
				{args: args("queue extend jobs w {0.1.1}"), wantCode: 1, stderr: []string{`stale`}},
				{args: args("queue claim jobs w --max 5"), stdout: []string{
					`(?m)^PARTITION\s+OFFSET\s+DELIVERY\s+LEASE UNTIL\s+TOKEN\s+KEY\s+VALUE$`,
					`(?m)^0\s+1\s+2\s+\S+\s+{0.1.2}\s+-\s+bob:20$`, `(?m)^0\s+2\s+1\s+\S+\s+{0.2.1}\s+-\s+carol:-3$`}},
				// One stale, one live: printed per token, and the command fails.
				{args: args("queue extend jobs w {0.1.1} {0.1.2}"), wantCode: 1, stdout: []string{`(?m)^{0.1.1}\s+stale\s+`, `(?m)^{0.1.2}\s+ok\s+lease until`}, stderr: []string{`some tokens were refused`}},
				{args: args("queue nack jobs w {0.2.1} --permanent --reason negative-amount"), stdout: []string{`(?m)^{0.2.1}\s+ok\s+dead-lettered$`}},
				// The second failed delivery of two allowed dead-letters.
				{args: args("queue nack jobs w {0.1.2} --reason db-down -o json"), stdout: []string{`"dead_lettered": true`}},
				{args: args("queue ack jobs w not-a-token"), wantCode: 1, stderr: []string{`^logctl: .*no valid token: "not-a-token" is not a delivery token \(a claim answers them, as PARTITION.OFFSET.DELIVERY.MAC\)\n$`}},
				{args: args("queue describe jobs w -o json"), stdout: []string{`"acked": 1`, `"dead_lettered": 2`, `"done_offset": 3`, `"dead_letter_records": 2`}},
				{args: args("dlq list jobs w"), stdout: []string{
					`(?m)^DLQ OFFSET\s+REASON\s+ORIGIN\s+KEY\s+ATTEMPTS\s+REDRIVES\s+AGE\s+STATE\s+LAST ERROR$`,
					`(?m)^0/0\s+rejected\s+jobs/0@2\s+-\s+1\s+0\s+\S+\s+-\s+negative-amount$`,
					`(?m)^0/1\s+max_deliveries\s+jobs/0@1\s+-\s+2\s+0\s+\S+\s+-\s+db-down$`},
					stderr: []string{`^2 dead letters in jobs.w.dlq\n$`}},
				{args: args("dlq list jobs w --reason max_deliveries -o json"), stdout: []string{`"reason": "max_deliveries"`, `"origin_offset": 1`}},
				{args: args("dlq list jobs w --reason rejected"), stdout: []string{`(?m)^0/0\s+rejected\s+`}, stderr: []string{`^1 dead letter in jobs.w.dlq\n$`}},
				{args: args("dlq list jobs w --history"), stdout: []string{
					`(?m)^0/1\s+max_deliveries\s+jobs/0@1\s+-\s+2\s+0\s+\S+\s+-\s+db-down\n\s+#1\s+nacked\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\s+worker billing-7\s+held \S+\s+extended 0\s+db-down\n\s+#2\s+nacked\s+\S+\s+worker -\s+held \S+\s+extended 1\s+db-down$`,
					`(?m)^0/0\s+rejected\s+jobs/0@2\s+-\s+1\s+0\s+\S+\s+-\s+negative-amount\n\s+#1\s+rejected\s+\S+\s+worker -\s+held \S+\s+extended 0\s+negative-amount$`}},
				{args: args("dlq list jobs w --history -o json"), stdout: []string{`"outcome": "nacked"`, `"worker": "billing-7"`, `"history": \{`}},
				{args: args("dlq list jobs w --reason expired -o json"), stdoutExact: "[]\n"},
				{args: args("queue claim jobs w -o json"), stdoutExact: ""},
				// Redrive one dead letter by name (the console's "redrive selected").
				{args: args("dlq redrive jobs w --record 0/1 --dry-run"), stdout: []string{`(?m)^0/1\s+dry-run\s+max_deliveries\s+jobs/0@1`,
					`(?m)^dry run: 1 selected, 1 would be redriven, 0 refused by the loop guard$`}},
				{args: args("dlq redrive jobs w --record 1-2"), wantCode: exitUsage, stderr: []string{`--record "1-2": want PARTITION/OFFSET`}},
				{args: args("dlq redrive jobs w --record 0/1 --no-progress"), stdout: []string{`(?m)^1 selected, 1 redriven, 0 already redriven by an earlier run, 0 refused by the loop guard \(job rd\d+ done`}},
				{args: args("queue claim jobs w -o json"), stdout: []string{`"offset":3,.*"value":"bob:20"`}},
				// The redriven dead letter says so; the other does not.
				{args: args("dlq list jobs w"), stdout: []string{
					`(?m)^DLQ OFFSET\s+REASON\s+ORIGIN\s+KEY\s+ATTEMPTS\s+REDRIVES\s+AGE\s+STATE\s+LAST ERROR$`,
					`(?m)^0/0\s+rejected\s+jobs/0@2\s+-\s+1\s+0\s+\S+\s+-\s+negative-amount$`,
					`(?m)^0/1\s+max_deliveries\s+jobs/0@1\s+-\s+2\s+0\s+\S+\s+redriven by job rd\d+ at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\s+db-down$`}},
				{args: args("dlq list jobs w -o json"), stdout: []string{`"offset": 1,[^}]*"redrive": \{\s+"job": "rd\d+",\s+"pending": false,\s+"at": "\d{4}-`}},
				{args: args("dlq list jobs w --not-redriven"), stdout: []string{`(?m)^0/0\s+rejected\s+`}, stderr: []string{`^1 dead letter in jobs.w.dlq\n$`}},
			},
		},
		{
			name: "pause and resume",
			steps: []step{
				{args: args("topic create jobs")},
				{args: args("produce jobs"), stdin: "x\n"},
				{args: args("queue create jobs w")},
				{args: args("queue pause jobs w"), stdout: []string{`^Queue group w on jobs paused\n$`}},
				{args: args("queue pause jobs w"), stdout: []string{`already paused`}},
				{args: args("queue claim jobs w -o json"), stdoutExact: "", stderr: []string{`queue group w on jobs is paused: it delivers nothing until`}},
				{args: args("queue describe jobs w"), stdout: []string{`State: PAUSED`}},
				{args: args("queue resume jobs w -o json"), stdout: []string{`"paused": false`, `"changed": true`}},
				{args: args("queue resume jobs w -o json"), stdout: []string{`"changed": false`}},
				{args: args("queue claim jobs w -o json"), stdout: []string{`"token":"{0.0.1}"`}},
			},
		},
		{
			name: "age limit: 0 is none, out of range says the range",
			steps: []step{
				{args: args("topic create jobs")},
				{args: args("queue create jobs w --age-limit 1h"), stdout: []string{`(?m)^Age limit:\s+1h$`}},
				{args: args("queue alter jobs w --lease 1m"), stdout: []string{`(?m)^Age limit:\s+1h$`}},
				{args: args("queue alter jobs w --age-limit 0"), stdout: []string{`(?m)^Age limit:\s+none$`}},
				{args: args("queue alter jobs w --age-limit 200h"), wantCode: 1, stderr: []string{`age_limit_ms 720000000 outside \[0, 604800000\] \(168h0m0s\) \(0: no limit\)`}},
				{args: args("queue alter jobs w --age-limit -1s"), wantCode: exitUsage, stderr: []string{`--age-limit -1s: want 0 \(no limit\) or a duration up to 168h0m0s`}},
				{args: args("queue describe jobs w"), stdout: []string{`(?m)^Age limit:\s+none$`}},
			},
		},
		{
			name: "unknown group",
			steps: []step{
				{args: args("topic create jobs")},
				{args: args("queue describe jobs nope"), wantCode: 3, stderr: []string{`queue group not found: nope on topic jobs`}},
				{args: args("queue claim jobs nope"), wantCode: 3, stderr: []string{`queue group not found`}},
				{args: args("queue pause jobs nope"), wantCode: 3, stderr: []string{`queue group not found`}},
				{args: args("dlq list jobs nope"), wantCode: 3, stderr: []string{`queue group not found`}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := logdtest.Start(t, logdtest.Options{})
			tokens := tokenScript{}
			for i, s := range tt.steps {
				s = tokens.fill(t, s)
				r := runCLI(t, srv, s.stdin, s.args...)
				tokens.learn(r.stdout)
				where := fmt.Sprintf("step %d: logctl %s", i, strings.Join(s.args, " "))
				if r.code != s.wantCode {
					t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", where, r.code, s.wantCode, r.stdout, r.stderr)
				}
				if s.stdoutExact != "" || (s.stdout == nil && strings.Contains(strings.Join(s.args, " "), "-o json")) {
					if r.stdout != s.stdoutExact {
						t.Fatalf("%s: stdout\n%q\nwant\n%q", where, r.stdout, s.stdoutExact)
					}
				}
				for _, p := range s.stdout {
					if !regexp.MustCompile(p).MatchString(r.stdout) {
						t.Fatalf("%s: stdout does not match %q:\n%s", where, p, r.stdout)
					}
				}
				for _, p := range s.stderr {
					if !regexp.MustCompile(p).MatchString(r.stderr) {
						t.Fatalf("%s: stderr does not match %q:\n%s", where, p, r.stderr)
					}
				}
				if s.wantCode != 0 && strings.Count(r.stderr, "\n") != 1 {
					t.Fatalf("%s: want one error line on stderr, got:\n%s", where, r.stderr)
				}
			}
		})
	}
}

// tokenScript names the delivery tokens of a script: {P.O.D} stands for
// the token of partition P, offset O, delivery D, as the node handed it
// out in an earlier step's output.
type tokenScript map[string]string

// tokenRE matches a token and captures its name.
var tokenRE = regexp.MustCompile(`\b(\d+\.\d+\.\d+)\.[0-9a-f]{16}\b`)

// namedToken matches a {P.O.D} name.
var namedToken = regexp.MustCompile(`\{(\d+\.\d+\.\d+)\}`)

// learn notes the tokens in out.
func (ts tokenScript) learn(out string) {
	for _, m := range tokenRE.FindAllStringSubmatch(out, -1) {
		ts[m[1]] = m[0]
	}
}

// fill replaces the names of s: in arguments by the tokens (a name not
// handed out yet fails the test), in patterns by the token or, if not
// handed out yet, by any token of that name.
func (ts tokenScript) fill(t *testing.T, s step) step {
	t.Helper()
	out := s
	out.args = nil
	for _, a := range s.args {
		out.args = append(out.args, namedToken.ReplaceAllStringFunc(a, func(m string) string {
			tok, ok := ts[m[1:len(m)-1]]
			if !ok {
				t.Fatalf("argument %q names a token not handed out", a)
			}
			return tok
		}))
	}
	pattern := func(p string) string {
		return namedToken.ReplaceAllStringFunc(p, func(m string) string {
			name := m[1 : len(m)-1]
			if tok, ok := ts[name]; ok {
				return regexp.QuoteMeta(tok)
			}
			return regexp.QuoteMeta(name) + `\.[0-9a-f]{16}`
		})
	}
	out.stdout, out.stderr = nil, nil
	for _, p := range s.stdout {
		out.stdout = append(out.stdout, pattern(p))
	}
	for _, p := range s.stderr {
		out.stderr = append(out.stderr, pattern(p))
	}
	return out
}

// TestQueueCLIJSON decodes claim's JSON lines and dlq list's JSON array.
func TestQueueCLIJSON(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	mustRun(t, srv, "", "topic", "create", "jobs", "--partitions", "2")
	mustRun(t, srv, "a\nb\nc\nd\n", "produce", "jobs")
	mustRun(t, srv, "", "queue", "create", "jobs", "w", "--lease", "1m")
	before := time.Now().Add(-time.Second)
	r := mustRun(t, srv, "", "queue", "claim", "jobs", "w", "--max", "10", "-o", "json")
	type claimed struct {
		Topic, Group, Token string
		Partition           int32
		Offset              int64
		Value               *string
		Delivery            int
		LeaseDeadline       time.Time `json:"lease_deadline"`
		FirstDelivery       time.Time `json:"first_delivery"`
		ValueEncoding       string    `json:"value_encoding"`
		Timestamp           time.Time
	}
	var jobs []claimed
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		var j claimed
		if err := json.Unmarshal(sc.Bytes(), &j); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		jobs = append(jobs, j)
	}
	if len(jobs) != 4 {
		t.Fatalf("claimed %d records:\n%s", len(jobs), r.stdout)
	}
	seen := map[string]bool{}
	for _, j := range jobs {
		if j.Topic != "jobs" || j.Group != "w" || j.Delivery != 1 || j.Value == nil || seen[*j.Value] || !tokenRE.MatchString(j.Token) || !strings.HasPrefix(j.Token, fmt.Sprintf("%d.%d.1.", j.Partition, j.Offset)) {
			t.Errorf("claimed %+v", j)
		}
		seen[*j.Value] = true
		if lease := j.LeaseDeadline.Sub(j.FirstDelivery); j.FirstDelivery.Before(before) || lease < 59*time.Second || lease > 61*time.Second {
			t.Errorf("lease of %+v: first delivery %v, lease %v", j, j.FirstDelivery, lease)
		}
	}
	// Dead-letter one, with a reason, and read it back.
	mustRun(t, srv, "", "queue", "nack", "jobs", "w", jobs[0].Token, "--permanent", "--reason", "bad input")
	r = mustRun(t, srv, "", "dlq", "list", "jobs", "w", "-o", "json")
	var dead []deadLetterOut
	if err := json.Unmarshal([]byte(r.stdout), &dead); err != nil {
		t.Fatalf("%q: %v", r.stdout, err)
	}
	if len(dead) != 1 {
		t.Fatalf("dead letters: %+v", dead)
	}
	d := dead[0]
	if d.Topic != "jobs.w.dlq" || d.Reason != "rejected" || d.LastError != "bad input" || d.OriginTopic != "jobs" ||
		d.OriginPartition != jobs[0].Partition || d.OriginOffset != jobs[0].Offset || d.Group != "w" || d.Deliveries != 1 ||
		d.Value == nil || *d.Value != *jobs[0].Value || d.FirstDelivery.IsZero() || d.DeadLettered.Before(before) {
		t.Errorf("dead letter %+v", d)
	}
}

// TestDLQListHistoryKeepsColumns: with --history, each dead letter's
// attempts are a block of their own under its row, so every row's STATE
// and LAST ERROR start where the header's do (the attempts once shared
// the table's columns: they widened ORIGIN and KEY and cut the column
// blocks, so the rows after the first attempt lost the header's offsets).
func TestDLQListHistoryKeepsColumns(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	mustRun(t, srv, "", "topic", "create", "jobs")
	mustRun(t, srv, "a\nb\nc\n", "produce", "jobs")
	mustRun(t, srv, "", "queue", "create", "jobs", "w")
	r := mustRun(t, srv, "", "queue", "claim", "jobs", "w", "--max", "3", "--worker", "a-rather-long-worker-name")
	tokens := tokenRE.FindAllString(r.stdout, -1)
	if len(tokens) != 3 {
		t.Fatalf("claimed:\n%s", r.stdout)
	}
	for i, reason := range []string{"x", "a longer error", "tab\there"} {
		mustRun(t, srv, "", "queue", "nack", "jobs", "w", tokens[i], "--permanent", "--reason", reason)
	}
	mustRun(t, srv, "", "dlq", "redrive", "jobs", "w", "--record", "0/1", "--no-progress")
	r = mustRun(t, srv, "", "dlq", "list", "jobs", "w", "--history")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	header := lines[0]
	stateAt, errAt := strings.Index(header, "STATE"), strings.Index(header, "LAST ERROR")
	if stateAt < 0 || errAt < 0 {
		t.Fatalf("header %q", header)
	}
	want := map[string]struct{ state, lastError string }{
		"0/0": {state: "-", lastError: "x"},
		"0/1": {state: "redriven by job rd", lastError: "a longer error"},
		"0/2": {state: "-", lastError: `tab\there`},
	}
	rows := 0
	for _, l := range lines[1:] {
		dlq, _, _ := strings.Cut(l, " ")
		w, ok := want[dlq]
		if !ok {
			if !strings.HasPrefix(l, "  ") {
				t.Errorf("line %q is neither a dead letter's row nor an indented attempt", l)
			}
			continue
		}
		rows++
		if len(l) < errAt || l[stateAt-1] != ' ' || !strings.HasPrefix(l[stateAt:], w.state) || l[errAt-1] != ' ' || l[errAt:] != w.lastError {
			t.Errorf("row %s: STATE and LAST ERROR not at the header's offsets %d and %d (want %q, %q):\n%s\n%s", dlq, stateAt, errAt, w.state, w.lastError, header, l)
		}
	}
	if rows != len(want) {
		t.Errorf("%d dead-letter rows, want %d:\n%s", rows, len(want), r.stdout)
	}
}

// TestBenchQueue runs `bench queue` in both modes against the fake: every
// record is acked once, and --end-to-end reports produce→ack latencies.
func TestBenchQueue(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	for _, extra := range [][]string{nil, {"--end-to-end"}, {"--end-to-end", "--rate", "20000"}} {
		a := append([]string{"bench", "queue", "--records", "300", "--workers", "3", "--batch", "20", "--fill-batch", "25", "--partitions", "2", "-o", "json"}, extra...)
		r := mustRun(t, srv, "", a...)
		var out struct {
			Records    int64              `json:"records"`
			EndToEnd   bool               `json:"end_to_end"`
			ProduceAck map[string]float64 `json:"produce_to_ack_latency_ms"`
			Cycle      map[string]float64 `json:"cycle_latency_ms"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("%v: %q: %v", extra, r.stdout, err)
		}
		if out.Records != 300 || out.EndToEnd != (extra != nil) || out.Cycle["p50"] <= 0 {
			t.Fatalf("%v: %s", extra, r.stdout)
		}
		if e2e := out.ProduceAck; extra != nil && (e2e["p50"] <= 0 || e2e["max"] < e2e["p50"]) {
			t.Fatalf("%v: produce→ack %v", extra, e2e)
		}
	}
	r := runCLI(t, srv, "", "bench", "queue", "--rate", "10")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--end-to-end") {
		t.Fatalf("--rate without --end-to-end: exit %d, %q", r.code, r.stderr)
	}
}
