// Command logctl is the command line of logd: topics, produce, consume,
// node status and benchmarks. It talks to servers only through package
// client.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/logd-dev/logd/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// Exit codes, documented in the root command's help (root.go) and the
// README. Scripts branch on them, so each kind of failure keeps its code.
const (
	exitOK             = 0
	exitError          = 1 // any other failure
	exitUsage          = 2 // the command line cannot run as given
	exitNotFound       = 3 // a topic, partition, group or queue group does not exist
	exitRetryable      = 4 // not applied, and may succeed later (no leader, overloaded, unreachable)
	exitOutcomeUnknown = 5 // a write may or may not have been applied
)

// usageError marks a command line that cannot run as given: an unknown
// command or flag, wrong arguments, a bad flag value.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usageError.
func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// exitCode maps a command's error to logctl's exit code. The order
// matters: a write whose outcome is unknown stays exit 5 even when its
// last attempt failed with an error that is retryable or names a missing
// topic, since an earlier attempt may have been applied.
func exitCode(err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, client.ErrOutcomeUnknown):
		return exitOutcomeUnknown
	case errors.As(err, &ue):
		return exitUsage
	case errors.Is(err, client.ErrUnknownTopic), errors.Is(err, client.ErrUnknownPartition),
		errors.Is(err, client.ErrUnknownGroup), errors.Is(err, client.ErrUnknownQueueGroup):
		return exitNotFound
	case errors.Is(err, client.ErrRetryBudgetExhausted), client.IsRetryable(err):
		return exitRetryable
	}
	return exitError
}

// exitHint is added to the error line of some exit codes, so that a
// reader can tell "not applied" from "may have been applied".
func exitHint(code int) string {
	switch code {
	case exitRetryable:
		return " (not applied; try again later)"
	case exitOutcomeUnknown:
		return " (check whether it was applied before repeating it; a produce with the same --idempotency-key is safe to repeat)"
	}
	return ""
}

// run executes one logctl command line and returns its exit code (exitCode),
// reporting a failure as one line on stderr.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	opts := &globalOpts{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	root := newRootCmd(opts)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	if !opts.started {
		// Cobra failed before a command's own code began: an unknown
		// command or flag, wrong arguments, a required flag missing.
		err = &usageError{err}
	}
	code := exitCode(err)
	fmt.Fprintf(stderr, "logctl: %v%s\n", err, exitHint(code))
	return code
}
