package main

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
)

// TestCompleteNames: topic, group, queue group names complete from the
// server (the shell's __complete), filtered by what was typed, and never
// with file names.
func TestCompleteNames(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	mustRun(t, srv, "", "topic", "create", "orders")
	mustRun(t, srv, "", "topic", "create", "payments")
	mustRun(t, srv, "a\n", "produce", "orders")
	mustRun(t, srv, "", "consume", "orders", "--group", "billing")
	mustRun(t, srv, "", "queue", "create", "orders", "workers")
	tests := []struct {
		args string
		want string // the whole output: names, then the directive
	}{
		{args: "topic describe ''", want: "orders\norders.workers.dlq\npayments\n:4\n"},
		{args: "topic describe p", want: "payments\n:4\n"},
		{args: "topic describe orders ''", want: ":4\n"},
		{args: "consume ''", want: "orders\norders.workers.dlq\npayments\n:4\n"},
		{args: "group describe ''", want: "billing\n:4\n"},
		{args: "queue claim orders ''", want: "workers\n:4\n"},
		{args: "queue claim payments ''", want: ":4\n"},
		{args: "queue ack orders workers ''", want: ":4\n"},
		{args: "dlq list ''", want: "orders\norders.workers.dlq\npayments\n:4\n"},
		{args: "dlq redrive status ''", want: ":4\n"},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			// '' is the empty word the shell completes.
			args := []string{"__complete"}
			for _, a := range strings.Fields(tt.args) {
				args = append(args, strings.Trim(a, "'"))
			}
			r := mustRun(t, srv, "", args...)
			if got, _, _ := strings.Cut(r.stdout, "Completion ended"); got != tt.want {
				t.Fatalf("__complete %s printed %q, want %q", tt.args, r.stdout, tt.want)
			}
		})
	}
}

// TestCompleteNamesServerSilent: a server that accepts and never answers
// costs a completion its own bound (completionTimeout), not a request's
// timeout and retries, and offers nothing, not file names.
func TestCompleteNamesServerSilent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Never accepted: the kernel completes the connections, and the
	// requests wait for an answer that never comes.
	t.Cleanup(func() { ln.Close() })
	start := time.Now()
	r := mustRun(t, nil, "", "__complete", "topic", "describe", "--server", ln.Addr().String(), "")
	if took := time.Since(start); took >= client.DefaultTimeout {
		t.Errorf("completion against a silent server took %v, as long as a request's timeout", took)
	}
	if !strings.HasPrefix(r.stdout, ":4\n") {
		t.Errorf("completion against a silent server printed %q, want only the no-file directive", r.stdout)
	}
}

// TestCompletedArgsNameCommands: every command the completion table names
// exists, so a renamed command does not silently lose its completion.
func TestCompletedArgsNameCommands(t *testing.T) {
	root := newRootCmd(&globalOpts{})
	for path := range completedArgs() {
		c, rest, err := root.Find(strings.Fields(path))
		if err != nil || len(rest) != 0 || c.ValidArgsFunction == nil {
			t.Errorf("completion table names %q: found %v (rest %v, err %v) without its completion", path, commandPath(c), rest, err)
		}
	}
}

func commandPath(c *cobra.Command) string {
	if c == nil {
		return "nothing"
	}
	return c.CommandPath()
}
