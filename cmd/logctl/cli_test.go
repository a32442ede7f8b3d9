package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/logd-dev/logd/logdtest"
)

// step is one logctl invocation of a script and what it must print.
type step struct {
	args     []string
	stdin    string
	wantCode int
	// stdout must match every pattern (regexp, multi-line mode).
	stdout []string
	// stdoutExact, if set, must equal stdout.
	stdoutExact string
	// stderr must match every pattern.
	stderr []string
}

func args(s string) []string { return strings.Fields(s) }

func TestCLI(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "topic lifecycle",
			steps: []step{
				{args: args("topic create orders --partitions 3 --config retention.ms=1000"), stdout: []string{`created topic orders with 3 partitions`}},
				{args: args("topic create orders --partitions 3"), wantCode: 1, stderr: []string{`^logctl: create topic "orders": .*topic already exists: "orders"\n$`}},
				{args: args("topic create audit"), stdout: []string{`(?m)created topic audit with 1 partition$`}},
				{args: args("topic list"), stdout: []string{`(?m)^NAME\s+PARTITIONS\s+CREATED$`, `(?m)^audit\s+1\s+\d{4}-`, `(?m)^orders\s+3\s+`}},
				{args: args("topic describe orders"), stdout: []string{`(?m)^Topic:\s+orders$`, `(?m)^Config:\s+cleanup.policy=delete$`, `(?m)^\s+retention.ms=1000 \(1s\)$`, `(?m)^\s+segment.bytes=1073741824 \(1\.0 GiB\)$`, `(?m)^\s+retention.bytes=-1 \(unbounded\)$`,
					`(?m)^PARTITION\s+LOG START\s+END OFFSET\s+OFFSETS\s+BYTES\s+SEGMENTS\s+COMPACTED\s+LAST CLEANER RUN$`, `(?m)^2\s+0\s+0\s+0\s+0 B\s+0\s+0\s+-$`}},
				{args: args("topic delete audit"), stdout: []string{`deleted topic audit`}},
				{args: args("topic delete audit"), wantCode: 3, stderr: []string{`^logctl: delete topic "audit": .*unknown topic: "audit"\n$`}},
			},
		},
		{
			name: "topic alter",
			steps: []step{
				{args: args("topic create orders --config retention.ms=1000")},
				{args: args("topic alter orders --config retention.ms=5 -c cleanup.policy=compact"), stdout: []string{`(?m)^KEY\s+VALUE$`, `(?m)^cleanup.policy\s+compact$`, `(?m)^retention.ms\s+5$`}},
				{args: args("topic alter orders --delete-config retention.ms -o json"), stdout: []string{`"retention.ms": "604800000"`, `"cleanup.policy": "compact"`}},
				{args: args("topic describe orders"), stdout: []string{`(?m)^\s+retention.ms=604800000 \(7d\)$`}},
				{args: args("topic alter orders -c bogus=1"), wantCode: 1, stderr: []string{`^logctl: alter topic "orders": .*unknown key "bogus"\n$`}},
				{args: args("topic alter orders -c retention.ms=1 --delete-config retention.ms"), wantCode: 1, stderr: []string{`both set and deleted`}},
				{args: args("topic alter orders"), wantCode: 1, stderr: []string{`^logctl: nothing to change`}},
				{args: args("topic alter orders -c retention.ms"), wantCode: exitUsage, stderr: []string{`want key=value`}},
				{args: args("topic alter nope -c retention.ms=1"), wantCode: 3, stderr: []string{`^logctl: alter topic "nope": .*unknown topic: "nope"\n$`}},
			},
		},
		{
			name: "topic alter partitions",
			steps: []step{
				{args: args("topic create orders --partitions 2")},
				{args: args("topic alter orders --partitions 5 --dry-run"), stdout: []string{`(?m)^TOPIC\s+PARTITIONS BEFORE\s+PARTITIONS AFTER\s+ADDED$`, `(?m)^orders\s+2\s+5\s+3$`},
					stderr: []string{`(?m)^logctl: warning: keyed records produced from now on are spread over 5 partitions instead of 2: a key may go to another partition`, `(?m)^logctl: dry run: nothing changed; run without --dry-run to add 3 partitions$`}},
				{args: args("topic list"), stdout: []string{`(?m)^orders\s+2\s+`}},
				{args: args("topic alter orders --partitions 5"), stdout: []string{`(?m)^orders\s+2\s+5\s+3$`},
					stderr: []string{`(?m)^logctl: warning: keyed records produced from now on are spread over 5 partitions instead of 2`, `(?m)^logctl: added 3 partitions to topic orders$`}},
				{args: args("topic alter orders --partitions 5 -o json"), stdout: []string{`"previous_partitions": 5`, `"partitions": 5`, `"added": 0`, `"dry_run": false`}, stderr: []string{`already has 5 partitions: nothing changed`}},
				{args: args("topic alter orders --partitions 6 --dry-run -o json"), stdout: []string{`"previous_partitions": 5`, `"partitions": 6`, `"added": 1`, `"dry_run": true`, `"caveat": "keyed records`}},
				{args: args("topic describe orders"), stdout: []string{`(?m)^4\s+0\s+0\s+0\s+0 B\s+0\s+0\s+-$`}},
				{args: args("topic alter orders --partitions 3"), wantCode: 1, stderr: []string{`^logctl: create partitions of topic "orders": .*orders has 5 partitions and cannot shrink to 3 \(partitions can only be added\)\n$`}},
				{args: args("topic alter orders --partitions 3 --dry-run"), wantCode: 1, stderr: []string{`cannot shrink to 3`}},
				{args: args("topic alter orders --partitions 10001"), wantCode: 1, stderr: []string{`above the limit of 10000 per topic`}},
				{args: args("topic alter orders --partitions 0"), wantCode: 2, stderr: []string{`at least 1 partition`}},
				{args: args("topic alter orders --partitions 6 -c retention.ms=5"), wantCode: 2, stderr: []string{`does not combine with --config`}},
				{args: args("topic alter orders -c retention.ms=5 --dry-run"), wantCode: 2, stderr: []string{`--dry-run applies to --partitions only`}},
				{args: args("topic alter nope --partitions 2"), wantCode: 3, stderr: []string{`unknown topic: "nope"`}},
			},
		},
		{
			name: "topic list json",
			steps: []step{
				{args: args("topic list -o json"), stdoutExact: "[]\n"},
				{args: args("topic create t -p 2")},
				{args: args("topic list -o json"), stdout: []string{`"name": "t"`, `"partitions": 2`}},
				{args: args("topic describe t --output json"), stdout: []string{`"partition_state"`, `"end_offset": 0`}},
			},
		},
		{
			name: "produce from args and consume text",
			steps: []step{
				{args: args("topic create t --partitions 2")},
				{args: args("produce t a b c --partition 1"), stdoutExact: "PARTITION  OFFSET\n1          0\n1          1\n1          2\n"},
				{args: args("consume t"), stdoutExact: "a\nb\nc\n"},
				{args: args("consume t --partition 1 --from 1"), stdoutExact: "b\nc\n"},
				{args: args("consume t --partition 1 --from latest"), stdoutExact: ""},
				{args: args("consume t --partition 1 --from 3"), stdoutExact: ""},
				{args: args("consume t --partition 1 --from 4"), wantCode: 1, stderr: []string{`^logctl: --from 4 is past the end of "t" \(partition 1: log start 0, end 3\); the highest --from is the end, where only new records are read\n$`}},
				{args: args("consume t --partition 1 --from 4 --follow"), wantCode: 1, stderr: []string{`--from 4 is past the end of "t" \(partition 1: log start 0, end 3\)`}},
				{args: args("consume t --from 1"), wantCode: 1, stderr: []string{`--from 1 is past the end of "t" \(partition 0: log start 0, end 0\);`}},
				{args: args("consume t --max 2"), stdoutExact: "a\nb\n"},
				{args: args("consume t --partition 1 --meta"), stdout: []string{`(?m)^1:0\t\d{4}-\S+Z\t-\ta$`}},
			},
		},
		{
			name: "produce from stdin with key and headers, consume json",
			steps: []step{
				{args: args("topic create t --partitions 4")},
				{args: []string{"produce", "t", "--key", "k1", "--header", "src=test", "-o", "json"}, stdin: "one\r\ntwo\n\nthree", stdout: []string{`"records": 4`, `"results": \[`}},
				{args: args("consume t -o json"), stdout: []string{
					`(?m)^\{"topic":"t","partition":\d,"offset":0,"timestamp":"[^"]+","key":"k1","value":"one","headers":\[\{"key":"src","value":"test"\}\]\}$`,
					`(?m)"offset":2,.*"value":"",`,
					`(?m)"offset":3,.*"value":"three"`,
				}},
			},
		},
		{
			name: "many records print a summary",
			steps: []step{
				{args: args("topic create t --partitions 2")},
				{args: args("produce t --batch 7"), stdin: numbers(50), stdout: []string{`produced 50 records to t`, `(?m)^PARTITION\s+RECORDS\s+FIRST OFFSET\s+LAST OFFSET$`, `(?m)^0\s+25\s+0\s+24$`, `(?m)^1\s+25\s+0\s+24$`}},
				{args: args("topic describe t"), stdout: []string{`(?m)^0\s+0\s+25\s+25\s+`}},
			},
		},
		{
			name: "errors exit non-zero with one line",
			steps: []step{
				{args: args("consume nope"), wantCode: 3, stderr: []string{`^logctl: describe topic "nope": .*unknown topic: "nope"\n$`}},
				{args: args("produce nope x"), wantCode: 3, stderr: []string{`^logctl: produce to "nope": .*unknown topic: "nope"\n$`}},
				// Under -o json the error is an object a script can read.
				{args: args("topic describe nope -o json"), wantCode: 3, stderr: []string{`^\{"error":\{"code":3,"reason":"UNKNOWN_TOPIC","message":".*unknown topic: \\"nope\\""\}\}\n$`}},
				{args: args("produce"), wantCode: 2, stderr: []string{`requires at least 1 arg`}},
				{args: args("topic list --output xml"), wantCode: 2, stderr: []string{`--output "xml": want text, json or yaml`}},
				{args: args("consume t --from yesterday"), wantCode: exitUsage, stderr: []string{`--from "yesterday"`}},
				{args: args("topic create t --config nokey"), wantCode: exitUsage, stderr: []string{`--config "nokey": want key=value`}},
				{args: args("topic create t -p 2")},
				{args: args("consume t --partition 5"), wantCode: 3, stderr: []string{`has no partition 5`}},
				{args: args("produce t"), stdin: "", wantCode: 1, stderr: []string{`no records to produce`}},
			},
		},
		{
			name: "status",
			steps: []step{
				// {addr} is the node's client API address.
				{args: args("status"), stdout: []string{`(?m)^Node:\s+node-1$`, `(?m)^State:\s+Leader$`, `(?m)^Leader:\s+node-1 \({addr}\)$`, `(?m)^Commit index:\s+[1-9]\d*$`,
					`(?m)^MEMBER\s+RAFT ADDRESS\s+SUFFRAGE\s+LEADER$`, `(?m)^node-1\s+mem:node-1\s+voter\s+\*$`}},
				{args: args("status -o json"), stdout: []string{`"node_id": "node-1"`, `"commit_index": [1-9]`, `"suffrage": "voter"`, `"api_address": "{addr}"`}},
			},
		},
		{
			name: "cluster status shows feature levels",
			steps: []step{
				{args: args("cluster status"), stdout: []string{`(?m)^Leader: node-1  Term: [1-9]\d*$`, `(?m)^Feature level: applied [1-9]\d*, available [1-9]\d* \(the lowest LEVEL\)$`,
					`(?m)^NODE\s+API ADDRESS\s+RAFT ADDRESS\s+ROLE\s+STATE\s+TERM\s+COMMIT\s+APPLIED\s+LAG\s+READY\s+LEVEL\s+BUILD$`,
					`(?m)^node-1\s+{addr}\s+mem:node-1\s+voter\s+Leader\s+[1-9]\d*\s+\d+\s+\d+\s+0\s+true\s+[1-9]\d*\s+[1-9]\d*$`}},
				{args: args("cluster status -o json"), stdout: []string{`"applied_level": [1-9]`, `"cluster_level": [1-9]`, `"feature_level": [1-9]`, `"build_level": [1-9]`}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runSteps(t, logdtest.Start(t, logdtest.Options{}), tt.steps)
		})
	}
}

// runSteps runs steps in order against srv, failing the test at the
// first that does not exit or print as it says.
func runSteps(t *testing.T, srv *logdtest.Server, steps []step) {
	t.Helper()
	for i, s := range steps {
		r := runCLI(t, srv, s.stdin, s.args...)
		where := fmt.Sprintf("step %d: logctl %s", i, strings.Join(s.args, " "))
		if r.code != s.wantCode {
			t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", where, r.code, s.wantCode, r.stdout, r.stderr)
		}
		if s.stdoutExact != "" || (s.stdout == nil && s.wantCode == 0 && s.stdoutExact == "" && strings.HasPrefix(strings.Join(s.args, " "), "consume")) {
			if r.stdout != s.stdoutExact {
				t.Fatalf("%s: stdout\n%q\nwant\n%q", where, r.stdout, s.stdoutExact)
			}
		}
		for _, p := range s.stdout {
			p = strings.ReplaceAll(p, "{addr}", regexp.QuoteMeta(srv.Addr()))
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
}

func numbers(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.String()
}

func TestConsumeJSONEncodesBinaryAsBase64(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	mustRun(t, srv, "", "topic", "create", "bin")
	// Invalid UTF-8 from stdin: one value "\xff\xfe".
	mustRun(t, srv, "\xff\xfe\n", "produce", "bin", "--key", "")
	r := mustRun(t, srv, "", "consume", "bin", "-o", "json")
	var rec struct {
		Key           *string `json:"key"`
		KeyEncoding   string  `json:"key_encoding"`
		Value         string  `json:"value"`
		ValueEncoding string  `json:"value_encoding"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
		t.Fatalf("unmarshal %q: %v", r.stdout, err)
	}
	if rec.Key == nil || *rec.Key != "" || rec.KeyEncoding != "" || rec.Value != "//4=" || rec.ValueEncoding != "base64" {
		t.Fatalf("record = %+v", rec)
	}
}

func TestServerFlagAndEnv(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	// --server wins over LOGD_SERVER (which runCLI sets to srv).
	r := runCLI(t, srv, "", "status", "--server", "http://127.0.0.1:1", "--max-retry-time", "100ms")
	if r.code != 4 || !strings.Contains(r.stderr, "connection refused") {
		t.Fatalf("status against a closed port: exit %d, stderr %q", r.code, r.stderr)
	}
	mustRun(t, nil, "", "topic", "list", "--server", srv.URL())
	r = runCLI(t, srv, "", "status", "--server", "bad address")
	if r.code != 1 || !strings.Contains(r.stderr, "server address") {
		t.Fatalf("bad --server: exit %d, stderr %q", r.code, r.stderr)
	}
}
