package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/buildinfo"
)

const defaultServer = "127.0.0.1:7070"

// globalOpts are the flags and streams every command shares.
type globalOpts struct {
	stdin  io.Reader
	stdout io.Writer // data
	stderr io.Writer // diagnostics
	getenv func(string) string

	server         string // --server
	addr           string // the server newClient uses: --server, else a variable, the context, the default
	contextName    string // --context
	tls            tlsFlags
	token          string
	tokenFile      string
	requestTimeout time.Duration
	// consistentReads is set by a command that reads linearizably
	// (consume --consistent) before it calls newClient.
	consistentReads bool
	// fetchRecords is set by a command that fetches records rather than
	// batches (bench consume --records-mode) before it calls newClient.
	fetchRecords    bool
	maxRetryTime    time.Duration
	maxOverloadWait optionalDuration // --max-overload-wait
	verbose         bool

	// overload follows the waits on an overloaded server (overload.go);
	// run makes it.
	overload *overloadWaits

	// ctxName and ctx are the context newClient found (contexts.go); nil
	// for none.
	ctxName string
	ctx     *contextEntry

	// plaintext is set when newClient made a client without TLS.
	plaintext bool

	// started is set when a command's own code begins (markStarted): an
	// error before that is cobra's, about the command line.
	started bool
}

func newRootCmd(opts *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "logctl",
		Short: "Command line for logd, a replicated append-only log",
		Long: `logctl manages topics, produces and consumes records, shows node status
and measures throughput of a logd cluster. Data goes to stdout, diagnostics
to stderr; commands that print data take --output json or yaml for
scripts. In both, durations are integer milliseconds in fields named *_ms,
sizes are bytes in fields named *bytes*, times are RFC 3339, and an empty
list is [] (never null). Every command's --help has examples;
"logctl completion bash|zsh|fish" prints a shell completion script.

Failed requests that may succeed later (no leader during an election, a
node restarting, admission control) are retried for up to --max-retry-time;
writes are retried only when that cannot write twice (nothing was written,
or every record has an --idempotency-key). A request refused for overload
(admission control, quotas, queue backlog bounds) is retried no sooner
than the server's retry-after, within --max-overload-wait when it is
given: 0 fails at once with exit 4 and the retry-after, for a script that
applies backpressure itself. On a terminal the wait shows on one line of
stderr.

Exit codes:
  0  success
  1  error (any failure not listed below)
  2  usage: unknown command or flag, wrong arguments, bad flag value
  3  not found: the topic, partition, group, queue group, token, SCRAM
     credential or context does not exist
  4  retryable: not applied (no leader, overloaded, node unreachable); try again later
  5  outcome unknown: a write may or may not have been applied (a lost reply,
     a timeout, a node lost during the call); check before repeating it, or
     repeat a produce with the same --idempotency-key
  6  not authenticated (no credentials, or a bad, expired or revoked token)
     or not permitted (the principal lacks a permission; nothing was applied)

Security: an https:// --server, or --tls-ca or --tls-cert, switches TLS on
(HTTP/2). --tls-cert and --tls-key present a client certificate (mTLS);
--token or --token-file send a bearer token. Each flag has an environment
variable: LOGCTL_SERVER (LOGD_SERVER works too), LOGCTL_TLS_CA,
LOGCTL_TLS_CERT, LOGCTL_TLS_KEY, LOGCTL_TOKEN, LOGCTL_TOKEN_FILE; a flag
wins over its variable, and both over the current context (logctl context:
a named server with its TLS files and token file). Prefer --token-file or
LOGCTL_TOKEN to --token, which other users of the machine can read in the
process list.`,
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		Version:           buildinfo.Read().String(),
	}
	cmd.SetVersionTemplate("logctl {{.Version}}\n")
	f := cmd.PersistentFlags()
	f.StringVar(&opts.server, "server", "", "logd node, host:port or http(s) URL (env LOGCTL_SERVER or LOGD_SERVER; default: the context's, else "+defaultServer+")")
	f.StringVar(&opts.contextName, "context", "", "use this context instead of the current one (env LOGCTL_CONTEXT; see logctl context)")
	f.StringVar(&opts.tls.ca, "tls-ca", "", "PEM file of the CA certificates that sign the servers' certificates; switches TLS on (env LOGCTL_TLS_CA; default: the system's roots)")
	f.StringVar(&opts.tls.cert, "tls-cert", "", "PEM file of a client certificate, for mutual TLS; switches TLS on (env LOGCTL_TLS_CERT)")
	f.StringVar(&opts.tls.key, "tls-key", "", "PEM file of the client certificate's private key (env LOGCTL_TLS_KEY)")
	f.StringVar(&opts.token, "token", "", "bearer token logd_<id>.<secret> (env LOGCTL_TOKEN; visible in the process list, prefer --token-file)")
	f.StringVar(&opts.tokenFile, "token-file", "", "file holding the bearer token (env LOGCTL_TOKEN_FILE)")
	f.DurationVar(&opts.requestTimeout, "request-timeout", client.DefaultTimeout, "timeout of each request attempt")
	f.DurationVar(&opts.maxRetryTime, "max-retry-time", client.DefaultMaxRetryTime, "retry a failed request that may succeed later for up to this long (0: no retries)")
	f.Var(&opts.maxOverloadWait, "max-overload-wait", "retry a request refused for overload (admission control, quotas, backlog bounds) for up to this long, each time after the server's retry-after (0: fail at once; default: as --max-retry-time)")
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
		newWhoAmICmd(opts),
		newTokenCmd(opts),
		newUserCmd(opts),
		newACLCmd(opts),
		newVersionCmd(opts),
		newContextCmd(opts),
		newCompletionCmd(opts),
	)
	// Completion of --context's value; cannot fail for a flag just defined.
	_ = cmd.RegisterFlagCompletionFunc("context", completeContextNames)
	addNameCompletion(cmd, opts)
	refuseUnknownSubcommands(cmd)
	markStarted(cmd, opts)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	return cmd
}

// groupOnly annotates a command that only groups subcommands: it runs
// nothing of its own (refuseUnknownSubcommands).
const groupOnly = "logctl.group-only"

// refuseUnknownSubcommands makes every command below the root that only
// groups subcommands (topic, queue, context...) refuse an argument that
// names none of them, with cobra's suggestions, as a usage error (exit 2).
// Cobra itself does that at the root only: below it, such a command
// printed its help and exited 0, so a script saw a typo succeed. Without
// arguments it prints its help, as before.
func refuseUnknownSubcommands(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c == root || !c.HasAvailableSubCommands() || c.Runnable() {
			return
		}
		c.Args = cobra.ArbitraryArgs
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[groupOnly] = "true"
		c.RunE = func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return c.Help()
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
			if c.SuggestionsMinimumDistance <= 0 {
				c.SuggestionsMinimumDistance = 2 // cobra's own, as at the root
			}
			if s := c.SuggestionsFor(args[0]); len(s) > 0 {
				msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
			}
			return usagef("%s\n\nRun '%s --help' for usage.", msg, c.CommandPath())
		}
	}
	walk(root)
}

// markStarted wraps the RunE of cmd and its subcommands so that
// opts.started records that a command's own code began; run reports
// errors from before that as usage errors (exit 2).
func markStarted(cmd *cobra.Command, opts *globalOpts) {
	if runE := cmd.RunE; runE != nil {
		cmd.RunE = func(c *cobra.Command, args []string) error {
			opts.started = true
			return runE(c, args)
		}
	}
	for _, sub := range cmd.Commands() {
		markStarted(sub, opts)
	}
}

// newClient returns a client of --server; the caller closes it. Each
// setting comes from its flag, else its variable, else the context
// (contexts.go), else its default.
func (o *globalOpts) newClient() (*client.Client, error) {
	if err := o.loadActiveContext(); err != nil {
		return nil, err
	}
	// LOGCTL_* names are the client's; LOGD_SERVER, from before there were
	// any, keeps working.
	for _, s := range []setting{{o.server, "--server"}, {o.getenv("LOGCTL_SERVER"), "LOGCTL_SERVER"}, {o.getenv("LOGD_SERVER"), "LOGD_SERVER"},
		o.contextSetting("server"), {defaultServer, "the default"}} {
		if s.value != "" {
			o.addr = s.value
			break
		}
	}
	copts := client.Options{Timeout: o.requestTimeout, ConsistentReads: o.consistentReads, FetchRecords: o.fetchRecords}
	switch {
	case o.maxRetryTime < 0:
		return nil, usagef("--max-retry-time %v is negative", o.maxRetryTime)
	case o.maxRetryTime == 0:
		copts.Retry.MaxAttempts = 1
	default:
		copts.Retry.MaxRetryTime = o.maxRetryTime
	}
	if err := overloadRetry(&copts.Retry, o.maxOverloadWait); err != nil {
		return nil, err
	}
	if o.verbose {
		o.overload.quiet()
	}
	copts.Retry.OnRetry = func(e client.RetryEvent) {
		if o.verbose {
			fmt.Fprintf(o.stderr, "logctl: %s attempt %d failed, retrying in %v: %v\n", e.Method, e.Attempt, e.Delay.Round(time.Millisecond), e.Err)
		}
		o.overload.retry(e)
	}
	var err error
	if copts.Token, err = o.bearerToken(); err != nil {
		return nil, err
	}
	if copts.TLS, err = o.tlsConfig(); err != nil {
		return nil, err
	}
	o.plaintext = copts.TLS == nil
	return client.New(o.addr, copts)
}

// logf writes a diagnostic line to stderr.
func (o *globalOpts) logf(format string, args ...any) {
	fmt.Fprintf(o.stderr, "logctl: "+format+"\n", args...)
}
