package main

import (
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

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

// TestCompleteFlagValues: the values of flags naming topics, groups and
// queue groups complete from the server like arguments do, and never
// with file names (cobra's default for a flag is file names).
func TestCompleteFlagValues(t *testing.T) {
	srv := logdtest.Start(t, logdtest.Options{})
	mustRun(t, srv, "", "topic", "create", "orders")
	mustRun(t, srv, "", "topic", "create", "payments")
	mustRun(t, srv, "a\n", "produce", "orders")
	mustRun(t, srv, "", "consume", "orders", "--group", "billing")
	mustRun(t, srv, "", "queue", "create", "orders", "workers")
	mustRun(t, srv, "", "queue", "create", "payments", "refunds")
	const topics = "orders\norders.workers.dlq\npayments\npayments.refunds.dlq\n:4\n"
	tests := []struct {
		args string
		want string // the whole output: names, then the directive
	}{
		{args: "consume orders --group ''", want: "billing\n:4\n"},
		{args: "consume orders --group=b", want: "billing\n:4\n"},
		{args: "group reset-offsets billing --topic ''", want: topics},
		{args: "group reset-offsets billing --topic p", want: "payments\npayments.refunds.dlq\n:4\n"},
		{args: "dlq redrive orders workers --target ''", want: topics},
		{args: "dlq redrive orders workers --dead-letter-topic ''", want: topics},
		{args: "dlq list orders workers --dead-letter-topic o", want: "orders\norders.workers.dlq\n:4\n"},
		{args: "queue create orders w2 --dead-letter-topic ''", want: topics},
		{args: "queue alter orders workers --dead-letter-topic ''", want: topics},
		{args: "acl add --topic ''", want: topics},
		{args: "acl add --group ''", want: "billing\n:4\n"},
		{args: "acl add --queue ''", want: "refunds\nworkers\n:4\n"},
		{args: "acl list --queue w", want: "workers\n:4\n"},
		{args: "acl remove --group ''", want: "billing\n:4\n"},
		{args: "bench consume --topic pay", want: "payments\npayments.refunds.dlq\n:4\n"},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
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

// TestCompletedFlagsNameFlags: every flag the flag completion table names
// exists and completes, and every flag whose name says it names a topic,
// group or queue group is in the table (but bench queue's, which name new
// ones), so a new such flag does not offer file names.
func TestCompletedFlagsNameFlags(t *testing.T) {
	root := newRootCmd(&globalOpts{})
	table := completedFlags()
	for path, flags := range table {
		c, rest, err := root.Find(strings.Fields(path))
		if err != nil || len(rest) != 0 {
			t.Errorf("flag completion table names command %q: found %v (rest %v, err %v)", path, commandPath(c), rest, err)
			continue
		}
		for flag := range flags {
			if _, ok := c.GetFlagCompletionFunc(flag); !ok {
				t.Errorf("%s --%s: no completion", path, flag)
			}
		}
	}
	naming := []string{"topic", "group", "queue", "target", "dead-letter-topic"}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		path := strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), root.Name()), " ")
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if path == "bench queue" || !slices.Contains(naming, f.Name) {
				return
			}
			if _, ok := table[path][f.Name]; !ok {
				t.Errorf("%s --%s names a topic or group but is not in completedFlags", path, f.Name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

func commandPath(c *cobra.Command) string {
	if c == nil {
		return "nothing"
	}
	return c.CommandPath()
}
