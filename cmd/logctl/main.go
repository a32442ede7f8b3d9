// Command logctl is the command line of logd: topics, produce, consume,
// node status and benchmarks. It talks to servers only through package
// client.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/logd-dev/logd/client"
	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// Exit codes, documented in the root command's help (root.go) and the
// user guide (docs/guide.md, "Exit codes"). Scripts branch on them, so each kind of failure keeps its code.
const (
	exitOK             = 0
	exitError          = 1 // any other failure
	exitUsage          = 2 // the command line cannot run as given
	exitNotFound       = 3 // a topic, partition, group, queue group, token, SCRAM credential or logctl context does not exist
	exitRetryable      = 4 // not applied, and may succeed later (no leader, overloaded, unreachable)
	exitOutcomeUnknown = 5 // a write may or may not have been applied
	exitAuth           = 6 // not authenticated, or not permitted
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
	case errors.Is(err, client.ErrUnauthenticated), errors.Is(err, client.ErrPermissionDenied):
		return exitAuth
	case errors.Is(err, client.ErrUnknownTopic), errors.Is(err, client.ErrUnknownPartition),
		errors.Is(err, client.ErrUnknownGroup), errors.Is(err, client.ErrUnknownQueueGroup),
		errors.Is(err, client.ErrUnknownToken), errors.Is(err, client.ErrUnknownSCRAMCredential), errors.Is(err, errUnknownContext):
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
	tty := isTerminal(stderr)
	opts.overload = newOverloadWaits(stderr, tty)
	if tty {
		opts.stdout = eraseFirst{w: stdout, s: opts.overload}
	}
	root := newRootCmd(opts)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	opts.overload.Close()
	if err == nil {
		return exitOK
	}
	if !opts.started {
		// Cobra failed before a command's own code began: an unknown
		// command or flag, wrong arguments, a required flag missing.
		err = &usageError{err}
	}
	code := exitCode(err)
	if format := structuredOutput(cmd); format != "" {
		// A script reading --output json|yaml reads the error too.
		writeErrorObject(stderr, format, code, err)
		return code
	}
	var ae *client.AuthError
	if code == exitAuth && errors.As(err, &ae) {
		// The refusal says it all (who lacks what); the call it came
		// from would only repeat the resource's name.
		fmt.Fprintf(stderr, "logctl: %v%s\n", ae, authHint(ae))
		return code
	}
	hint := exitHint(code)
	if code == exitRetryable && errors.Is(err, client.ErrOverloaded) {
		hint = opts.overloadHint(err)
	}
	if code == exitRetryable && strings.Contains(err.Error(), "connection refused") {
		hint += fmt.Sprintf("; nothing listens at %s: is logd running there? (make run starts one; --server or LOGCTL_SERVER names another)", opts.addr)
	}
	if code == exitError && opts.plaintext && strings.HasSuffix(err.Error(), "400 Bad Request") {
		// What a TLS listener answers to plain HTTP (net/http writes the
		// reason in a body the client does not read): the connect
		// error's "internal: 400 Bad Request" would only mislead.
		fmt.Fprintf(stderr, "logctl: %s answered this plain-HTTP call with 400 Bad Request, as a TLS port does: give --tls-ca, or an https:// --server\n", opts.addr)
		return code
	}
	fmt.Fprintf(stderr, "logctl: %v%s\n", err, hint)
	return code
}

// structuredOutput is the --output of the command that ran, when it is
// json or yaml, else "".
func structuredOutput(cmd *cobra.Command) string {
	if cmd == nil {
		return ""
	}
	if f := cmd.Flags().Lookup("output"); f != nil && (f.Value.String() == outputJSON || f.Value.String() == outputYAML) {
		return f.Value.String()
	}
	return ""
}

// errorObject is an error as logctl writes it under --output json (one
// line) or yaml:
// the exit code, the server's reason (client.ReasonOf; empty for an error
// of logctl's own), the message, and the server's retry-after when it
// gave one.
type errorObject struct {
	Error errorFields `json:"error"`
}

type errorFields struct {
	Code         int    `json:"code"`
	Reason       string `json:"reason,omitempty"`
	Message      string `json:"message"`
	RetryAfterMs int64  `json:"retry_after_ms,omitempty"`
}

// writeErrorObject writes err as one errorObject in format.
func writeErrorObject(w io.Writer, format string, code int, err error) {
	o := errorObject{Error: errorFields{Code: code, Reason: client.ReasonOf(err), Message: err.Error()}}
	var oe *client.OverloadedError
	if errors.As(err, &oe) {
		o.Error.RetryAfterMs = oe.RetryAfter.Milliseconds()
	}
	if format == outputJSON {
		// One line, as every error logctl prints: a script reads one object.
		if b, jerr := json.Marshal(o); jerr == nil {
			fmt.Fprintf(w, "%s\n", b)
			return
		}
	} else if werr := writeData(w, format, o); werr == nil {
		return
	}
	fmt.Fprintf(w, "logctl: %v\n", err)
}

// authHint says how to get past a refusal: which credentials logctl
// takes, or the ACL that would grant the missing permission.
func authHint(ae *client.AuthError) string {
	if ae.TLS {
		// A token cannot help: the handshake failed before any request.
		return " (the server requires a client certificate at the TLS layer, before any token is read: give --tls-cert and --tls-key, or LOGCTL_TLS_CERT and LOGCTL_TLS_KEY)"
	}
	if ae.Unauthenticated {
		return " (give a token with --token-file, --token or LOGCTL_TOKEN, or a client certificate with --tls-cert and --tls-key)"
	}
	if grant := grantCommand(ae.Principal, ae.Permission); grant != "" {
		return " (an administrator can grant it: " + grant + ")"
	}
	return ""
}
