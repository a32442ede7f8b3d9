package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

const defaultServer = "127.0.0.1:7070"

// globalOpts are the flags and streams every command shares.
type globalOpts struct {
	stdin  io.Reader
	stdout io.Writer // data
	stderr io.Writer // diagnostics
	getenv func(string) string

	server         string
	requestTimeout time.Duration
	verbose        bool
}

func newRootCmd(opts *globalOpts) *cobra.Command {
	server := opts.getenv("LOGD_SERVER")
	if server == "" {
		server = defaultServer
	}
	cmd := &cobra.Command{
		Use:   "logctl",
		Short: "Command line for logd, a replicated append-only log",
		Long: `logctl manages topics, produces and consumes records, shows node status
and measures throughput of a logd cluster. Data goes to stdout, diagnostics
to stderr; commands that print data take --output json for scripts.`,
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	f := cmd.PersistentFlags()
	f.StringVar(&opts.server, "server", server, "logd node, host:port or http(s) URL (env LOGD_SERVER)")
	f.DurationVar(&opts.requestTimeout, "request-timeout", client.DefaultTimeout, "timeout of each request attempt")
	f.BoolVarP(&opts.verbose, "verbose", "v", false, "log retries and other diagnostics to stderr")

	cmd.AddCommand(
		newTopicCmd(opts),
		newProduceCmd(opts),
		newConsumeCmd(opts),
		newStatusCmd(opts),
		newClusterCmd(opts),
		newBenchCmd(opts),
		newGroupCmd(opts),
		newQueueCmd(opts),
		newDLQCmd(opts),
	)
	return cmd
}

// newClient returns a client of --server; the caller closes it.
func (o *globalOpts) newClient() (*client.Client, error) {
	copts := client.Options{Timeout: o.requestTimeout}
	if o.verbose {
		copts.Retry.OnRetry = func(e client.RetryEvent) {
			fmt.Fprintf(o.stderr, "logctl: %s attempt %d failed, retrying in %v: %v\n", e.Method, e.Attempt, e.Delay.Round(time.Millisecond), e.Err)
		}
	}
	return client.New(o.server, copts)
}

// logf writes a diagnostic line to stderr.
func (o *globalOpts) logf(format string, args ...any) {
	fmt.Fprintf(o.stderr, "logctl: "+format+"\n", args...)
}
