package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/doctext"
	"github.com/logd-dev/logd/logdtest"
)

// TestExitCode is the table of exit codes by error kind.
func TestExitCode(t *testing.T) {
	notLeader := &client.NotLeaderError{}
	tests := []struct {
		name string
		err  error
		want int
	}{
		{name: "success", err: nil, want: 0},
		{name: "any other failure", err: errors.New("boom"), want: 1},
		{name: "idempotency conflict", err: fmt.Errorf("produce: %w", client.ErrIdempotencyConflict), want: 1},
		{name: "stale token", err: client.ErrStaleToken, want: 1},
		{name: "interrupted", err: context.Canceled, want: 1},
		{name: "usage", err: usagef("--output %q: want text, json or yaml", "xml"), want: 2},
		{name: "wrapped usage", err: fmt.Errorf("topic list: %w", usagef("bad")), want: 2},
		{name: "unknown topic", err: fmt.Errorf("describe topic: %w", client.ErrUnknownTopic), want: 3},
		{name: "unknown partition", err: client.ErrUnknownPartition, want: 3},
		{name: "unknown group", err: client.ErrUnknownGroup, want: 3},
		{name: "unknown queue group", err: client.ErrUnknownQueueGroup, want: 3},
		{name: "unknown token", err: fmt.Errorf("revoke token: %w", client.ErrUnknownToken), want: 3},
		{name: "unknown SCRAM credential", err: fmt.Errorf("delete: %w", client.ErrUnknownSCRAMCredential), want: 3},
		{name: "unauthenticated", err: fmt.Errorf("list topics: %w", &client.AuthError{Unauthenticated: true}), want: 6},
		{name: "permission denied", err: fmt.Errorf("produce: %w", &client.AuthError{Permission: "write topic orders", Principal: "User:alice"}), want: 6},
		{name: "permission denied, sentinel only", err: client.ErrPermissionDenied, want: 6},
		{name: "not leader", err: fmt.Errorf("produce: %w", notLeader), want: 4},
		{name: "overloaded", err: &client.OverloadedError{}, want: 4},
		{name: "unavailable (a read)", err: client.ErrUnavailable, want: 4},
		{name: "unreachable", err: connect.NewError(connect.CodeUnavailable, errors.New("connection refused")), want: 4},
		{name: "retry budget exhausted", err: fmt.Errorf("x (%w)", client.ErrRetryBudgetExhausted), want: 4},
		{name: "outcome unknown", err: &client.OutcomeUnknownError{Attempt: 1, Attempts: 1, Cause: client.ErrUnavailable, Err: client.ErrUnavailable}, want: 5},
		{name: "outcome unknown, last attempt not leader", err: fmt.Errorf("produce: %w", &client.OutcomeUnknownError{Attempt: 1, Attempts: 3, Cause: client.ErrUnavailable, Err: notLeader}), want: 5},
		{name: "outcome unknown, last attempt unknown topic", err: &client.OutcomeUnknownError{Attempt: 1, Attempts: 2, Cause: client.ErrUnavailable, Err: client.ErrUnknownTopic}, want: 5},
		{name: "outcome unknown comes before every other kind", err: &client.OutcomeUnknownError{Attempt: 1, Attempts: 2, Cause: client.ErrUnavailable, Err: usagef("x")}, want: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := exitCode(tt.err); got != tt.want {
				t.Fatalf("exitCode(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

// TestExitCodes runs logctl command lines that end in each exit code.
func TestExitCodes(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	mustRun(t, srv, "", "topic", "create", "t")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	unavailable := logdtest.Error(connect.CodeUnavailable, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_UNAVAILABLE}, "forwarding to the leader failed; outcome unknown: unexpected EOF")
	notLeader := logdtest.Error(connect.CodeUnavailable, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_NOT_LEADER}, "not the leader")
	overloaded := logdtest.Error(connect.CodeResourceExhausted, &logdv1.ErrorInfo{Reason: logdv1.Reason_REASON_OVERLOADED, RetryAfterMs: 1500}, "queue w of t is at its backlog bound")

	tests := []struct {
		name   string
		fail   []error // the next Produce calls fail with these
		args   string
		want   int
		stderr string
	}{
		{name: "ok", args: "produce t v", want: 0},
		{name: "unknown command", args: "frobnicate", want: 2, stderr: `unknown command "frobnicate"`},
		{name: "unknown flag", args: "topic list --frobnicate", want: 2, stderr: `unknown flag: --frobnicate`},
		{name: "missing argument", args: "produce", want: 2, stderr: `requires at least 1 arg`},
		{name: "bad output", args: "topic list -o xml", want: 2, stderr: `--output "xml": want text, json or yaml`},
		{name: "negative retry time", args: "topic list --max-retry-time -1s", want: 2, stderr: `--max-retry-time -1s is negative`},
		{name: "unknown topic", args: "produce nope v", want: 3, stderr: `unknown topic`},
		{name: "node unreachable", args: "status --max-retry-time 50ms --server " + down, want: 4, stderr: `connection refused.*\(not applied; try again later\)`},
		{name: "no leader, retries off", fail: []error{notLeader}, args: "produce t v --max-retry-time 0", want: 4, stderr: `not the leader`},
		{name: "no leader, then one", fail: []error{notLeader, notLeader}, args: "produce t v", want: 0},
		{name: "overloaded, retries off: the server's retry-after", fail: []error{overloaded}, args: "produce t v --max-retry-time 0", want: 4, stderr: `backlog bound \(not applied: server overloaded: retry after 1.5s; --max-overload-wait sets how long logctl waits\)\n$`},
		{name: "overloaded under -o json: one error object", fail: []error{overloaded}, args: "produce t v --max-retry-time 0 -o json", want: 4,
			stderr: `^\{"error":\{"code":4,"reason":"OVERLOADED","message":".*backlog bound","retry_after_ms":1500\}\}\n$`},
		{name: "unknown topic under -o yaml", args: "produce nope v -o yaml", want: 3, stderr: `(?s)^error:\n  code: 3\n  reason: UNKNOWN_TOPIC\n  message: .*unknown topic`},
		{name: "outcome unknown", fail: []error{unavailable}, args: "produce t v", want: 5, stderr: `outcome unknown, the write may or may not have been applied: forwarding.*check whether it was applied`},
		{name: "outcome unknown, then not leader until the retry window ends", fail: append([]error{unavailable}, repeat(notLeader, 100)...), args: "produce t v --idempotency-key k1 --max-retry-time 300ms", want: 5,
			stderr: `outcome unknown.*attempt 1 of \d+ failed with "forwarding.*the last failed with: .*not the leader`},
		{name: "outcome unknown, settled by a keyed retry", fail: []error{unavailable, notLeader}, args: "produce t v --idempotency-key k2", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := srv
			if len(tt.fail) > 10 {
				// More failures than the call will use: a node of its own,
				// so that the rest fail no other case.
				srv = logdtest.Start(t, logdtest.Options{})
				mustRun(t, srv, "", "topic", "create", "t")
			}
			srv.FailNext("Produce", tt.fail...)
			r := runCLI(t, srv, "", strings.Fields(tt.args)...)
			if r.code != tt.want {
				t.Fatalf("logctl %s: exit %d, want %d\nstderr: %s", tt.args, r.code, tt.want, r.stderr)
			}
			if tt.stderr != "" && !regexp.MustCompile(tt.stderr).MatchString(r.stderr) {
				t.Fatalf("logctl %s: stderr %q, want %q", tt.args, r.stderr, tt.stderr)
			}
			if tt.want != 0 && !strings.Contains(tt.args, " -o ") && strings.Count(r.stderr, "\n") != 1 {
				t.Fatalf("logctl %s: stderr is not one line: %q", tt.args, r.stderr)
			}
		})
	}
}

func repeat(err error, n int) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}

// TestHelpDocumentsExitCodes: the exit codes are in logctl --help.
func TestHelpDocumentsExitCodes(t *testing.T) {
	r := mustRun(t, nil, "", "--help")
	for _, want := range []string{`(?m)^Exit codes:$`, `(?m)^\s+0\s+success`, `(?m)^\s+2\s+usage`, `(?m)^\s+3\s+not found`, `(?m)^\s+4\s+retryable`, `(?m)^\s+5\s+outcome unknown`, `(?m)^\s+6\s+not authenticated`, `(?m)^\s+or not permitted`} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("--help lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestExitCodesDocumented: every exit code logctl returns is described,
// once and in order, in logctl --help and in the table of the user
// guide's "Exit codes" section, so that neither can drift from the
// constants in main.go.
func TestExitCodesDocumented(t *testing.T) {
	codes := []int{exitOK, exitError, exitUsage, exitNotFound, exitRetryable, exitOutcomeUnknown, exitAuth}
	help := mustRun(t, nil, "", "--help").stdout
	_, section, ok := strings.Cut(help, "\nExit codes:\n")
	if !ok {
		t.Fatalf("--help has no Exit codes section:\n%s", help)
	}
	section, _, _ = strings.Cut(section, "\n\n")
	guide := doctext.ReadSection(t, "docs/guide.md", "### Exit codes")
	docs := []struct {
		name string
		re   *regexp.Regexp
		text string
	}{
		{name: "--help", re: regexp.MustCompile(`(?m)^  (\d+)  \S`), text: section},
		{name: `docs/guide.md, "Exit codes"`, re: regexp.MustCompile(`(?m)^\| (\d+) \| \S`), text: guide},
	}
	for _, d := range docs {
		var got []int
		for _, m := range d.re.FindAllStringSubmatch(d.text, -1) {
			n, _ := strconv.Atoi(m[1])
			got = append(got, n)
		}
		if !slices.Equal(got, codes) {
			t.Errorf("%s documents exit codes %v, want %v", d.name, got, codes)
		}
	}
}

// TestTypoAtEveryLevelExits2: at every command that groups subcommands, an
// argument that names none of them is a usage error (exit 2) with cobra's
// suggestion, never help and exit 0; the bare command still prints its
// help and exits 0.
func TestTypoAtEveryLevelExits2(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		var subs []string
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				subs = append(subs, sub.Name())
			}
			walk(sub)
		}
		// A command of its own that also has subcommands (dlq redrive
		// TOPIC GROUP, dlq redrive status) takes the typo as its argument.
		if len(subs) == 0 || c.HasParent() && c.Annotations[groupOnly] == "" {
			return
		}
		path := strings.Fields(c.CommandPath())[1:]
		typo := subs[0] + "x"
		r := runCLI(t, nil, "", append(slices.Clone(path), typo)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "Did you mean this?") || !strings.Contains(r.stderr, subs[0]) {
			t.Errorf("logctl %s: exit %d, stderr %q; want exit 2 suggesting %q", strings.Join(append(path, typo), " "), r.code, r.stderr, subs[0])
		}
		if len(path) > 0 {
			if r := runCLI(t, nil, "", path...); r.code != exitOK || !strings.Contains(r.stdout, "Available Commands") {
				t.Errorf("logctl %s: exit %d, stdout %.80q; want its help and exit 0", strings.Join(path, " "), r.code, r.stdout)
			}
		}
	}
	walk(newRootCmd(&globalOpts{getenv: func(string) string { return "" }}))
}

// TestUsageErrorsExit2: a command line that cannot run as given exits 2
// before logctl calls any server, whether cobra or the command's own
// checks of its flags refuse it.
func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"group", "reset-offsets", "billing", "--to-offset", "2"},
		{"group", "reset-offsets", "billing", "--topic", "orders"},
		{"group", "reset-offsets", "billing", "--topic", "orders", "--to-offset", "-1"},
		{"consume", "orders", "--from", "yesterday"},
		{"consume", "orders", "--partition", "-1"},
		{"consume", "orders", "--group", "g", "--partition", "0"},
		{"produce", "orders", "--batch", "0", "x"},
		{"dlq", "list", "orders", "--reason", "bored"},
		{"bench", "produce", "--concurrency", "0"},
		{"queue", "top", "orders", "w", "--interval", "0s"},
		{"topic", "list", "--output", "xml"},
		{"topic", "create"},
	} {
		r := runCLI(t, nil, "", append([]string{"--server", "127.0.0.1:1"}, args...)...)
		if r.code != exitUsage {
			t.Errorf("logctl %s: exit %d, stderr %q; want 2", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}

// TestConnectionRefusedHint: a server that is not there is named, with
// how to start one or name another, not only "try again later".
func TestConnectionRefusedHint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	r := runCLI(t, nil, "", "--server", addr, "--max-retry-time", "0", "topic", "list")
	if r.code != exitRetryable || !strings.Contains(r.stderr, "nothing listens at "+addr) || !strings.Contains(r.stderr, "make run") {
		t.Fatalf("exit %d, stderr %q; want 4 with a hint naming %s", r.code, r.stderr, addr)
	}
}
