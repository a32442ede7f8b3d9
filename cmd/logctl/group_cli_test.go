package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
)

// runGroupSteps runs a script of logctl invocations against srv, as TestCLI
// does.
func runGroupSteps(t *testing.T, srv *logdtest.Server, steps []step) {
	t.Helper()
	for i, s := range steps {
		r := runCLI(t, srv, s.stdin, s.args...)
		where := fmt.Sprintf("step %d: logctl %s", i, strings.Join(s.args, " "))
		if r.code != s.wantCode {
			t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", where, r.code, s.wantCode, r.stdout, r.stderr)
		}
		if (s.stdoutExact != "" || strings.HasPrefix(strings.Join(s.args, " "), "consume")) && s.stdout == nil && s.wantCode == 0 && r.stdout != s.stdoutExact {
			t.Fatalf("%s: stdout\n%q\nwant\n%q", where, r.stdout, s.stdoutExact)
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
}

// The billing/analytics walk-through: two groups read the same topic
// independently, consume --group commits what it printed, and a reset is
// planned (changing nothing), clamped, and executed.
func TestGroupCLI(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	runGroupSteps(t, srv, []step{
		{args: args("topic create orders -p 2")},
		{args: args("produce orders created paid shipped --partition 0")},
		{args: args("consume orders --group billing"), stdoutExact: "created\npaid\nshipped\n"},
		// Committed after printing: nothing new for billing.
		{args: args("consume orders --group billing"), stdoutExact: ""},
		{args: args("consume orders --group analytics --max 2"), stdoutExact: "created\npaid\n"},
		{args: args("consume orders --group analytics --partition 0"), wantCode: exitUsage, stderr: []string{`--partition and --group exclude each other`}},
		{args: args("group list"), stdout: []string{`(?m)^GROUP\s+STATE\s+MEMBERS\s+GENERATION\s+TOPICS$`, `(?m)^analytics\s+empty\s+0\s+\d+\s+orders$`, `(?m)^billing\s+empty\s+0\s+\d+\s+orders$`}},
		{args: args("group list -o json"), stdout: []string{`"group": "analytics"`, `"group": "billing"`, `"members": 0`}},
		{args: args("group describe analytics"), stdout: []string{`(?m)^Group:\s+analytics$`, `(?m)^State:\s+empty$`,
			`(?m)^TOPIC\s+PARTITION\s+COMMITTED\s+LOG START\s+END OFFSET\s+LAG\s+LAG TIME\s+OWNER\s+SKIPPED$`,
			`(?m)^orders\s+0\s+2\s+0\s+3\s+1\s+\S+\s+-\s+0$`, `(?m)^orders\s+1\s+-\s+0\s+0\s+0\s+0s\s+-\s+0$`}},
		{args: args("group describe billing -o json"), stdout: []string{`"committed_offset": 3`, `"lag_records": 0`, `"lag_ms": 0,`, `"members": \[\]`}},
		{args: args("group describe analytics -o json"), stdout: []string{`"lag_records": 1,\s+"lag_ms": [1-9]\d*,`, `"partition": 1,\s+"committed_offset": null,`}},
		{args: args("group describe analytics -o yaml"), stdout: []string{`(?m)^    partition: 1\n    committed_offset: null$`}},
		{args: args("group describe billing -o yaml"), stdout: []string{`(?m)^group: billing$`, `(?m)^members: \[\]$`, `(?m)^partitions:$`, `(?m)^  - topic: orders$`, `(?m)^    committed_offset: 3$`, `(?m)^    lag_ms: 0$`}},
		{args: args("group describe nope"), wantCode: 3, stderr: []string{`^logctl: describe group "nope": `}},
		// A plan without --execute changes nothing.
		{args: args("group reset-offsets billing --topic orders:0 --to-earliest"), stdout: []string{
			`(?m)^TOPIC\s+PARTITION\s+CURRENT\s+NEW\s+LAG BEFORE\s+LAG AFTER\s+NOTE$`, `(?m)^orders\s+0\s+3\s+0\s+0\s+3\s*$`},
			stderr: []string{`dry run: nothing changed`}},
		{args: args("group describe billing -o json"), stdout: []string{`"committed_offset": 3`}},
		{args: args("group reset-offsets billing --topic orders:0 --to-offset 9"), stdout: []string{`(?m)^orders\s+0\s+3\s+3\s+0\s+0\s+clamped \(asked 9\)$`},
			stderr: []string{`offset 9 is outside the log; clamped to its end, 3`}},
		{args: args("group reset-offsets billing --all-topics --to-latest -o json"), stdout: []string{`"executed": false`, `"partition": 1`}},
		{args: args("group reset-offsets billing --topic orders:0 --shift-by -2 --execute -o json"), stdout: []string{`"executed": true`, `"new_offset": 1`, `"current_offset": 3`},
			stderr: []string{`reset applied to 1 partition; group billing is at generation \d+`}},
		{args: args("consume orders --group billing"), stdoutExact: "paid\nshipped\n"},
		{args: args("group reset-offsets billing --topic orders:0 --shift-by -9"), stdout: []string{`(?m)^orders\s+0\s+3\s+0\s+0\s+3\s+clamped \(asked -6\)$`},
			stderr: []string{`offset -6 is outside the log; clamped to its start, 0`}},
		{args: args("group reset-offsets billing --topic orders --to-earliest --to-latest"), wantCode: exitUsage, stderr: []string{`give exactly one of`}},
		{args: args("group reset-offsets billing --to-earliest"), wantCode: exitUsage, stderr: []string{`give --topic \(repeatable\) or --all-topics`}},
		{args: args("group reset-offsets billing --topic orders:x --to-earliest"), wantCode: exitUsage, stderr: []string{`partition "x" is not a number`}},
		{args: args("group reset-offsets billing --topic orders:7 --to-earliest"), wantCode: 3, stderr: []string{`unknown partition: orders has 2 partitions, not 7`}},
		{args: args("group delete billing"), stdoutExact: "deleted group billing\n"},
		{args: args("group delete billing"), wantCode: 3, stderr: []string{`^logctl: delete group "billing": `}},
		{args: args("group list"), stdout: []string{`(?m)^analytics\s+`}},
	})
	if strings.Contains(runCLI(t, srv, "", "group", "list").stdout, "billing") {
		t.Fatal("billing listed after delete")
	}
}

// A plan saved with --output json is applied by --from-file, and a group
// with a live member is not deleted.
func TestGroupCLIResetFromFileAndLiveMember(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	runGroupSteps(t, srv, []step{
		{args: args("topic create orders -p 2")},
		{args: args("produce orders a b c --partition 0")},
		{args: args("produce orders d e --partition 1")},
		{args: args("consume orders --group g"), stdout: []string{`(?m)^a$`, `(?m)^e$`}},
	})
	plan := mustRun(t, srv, "", "group", "reset-offsets", "g", "--topic", "orders", "--shift-by", "-1", "-o", "json").stdout
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(path, []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	runGroupSteps(t, srv, []step{
		{args: []string{"group", "reset-offsets", "g", "--from-file", path, "--topic", "orders"}, wantCode: exitUsage, stderr: []string{`--from-file names its partitions`}},
		{args: []string{"group", "reset-offsets", "other", "--from-file", path}, wantCode: exitUsage, stderr: []string{`is a plan for group "g", not "other"`}},
		{args: []string{"group", "reset-offsets", "g", "--from-file", path, "--execute"}, stdout: []string{`(?m)^orders\s+0\s+3\s+2\s+`, `(?m)^orders\s+1\s+2\s+1\s+`}},
		{args: args("consume orders --group g"), stdout: []string{`(?m)^c$`, `(?m)^e$`}},
	})
	// A live member holds the group until it leaves.
	c, err := client.New(srv.URL(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	gc, err := c.NewGroupConsumer(client.GroupConsumerOptions{Group: "g", Topics: []string{"orders"}, MemberID: "live", ManualCommit: true, MaxWait: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close(context.Background())
	if _, err := gc.Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	runGroupSteps(t, srv, []step{
		{args: args("group delete g"), wantCode: 1, stderr: []string{`live members|not empty`}},
		{args: args("group describe g"), stdout: []string{`(?m)^State:\s+(stable|rebalancing)$`, `(?m)^live\s+orders\s+orders:0,orders:1\s+`}},
	})
}
