// Command logctl is the command line of logd: topics, produce, consume,
// node status and benchmarks. It talks to servers only through package
// client.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// run executes one logctl command line and returns the exit code: 0 on
// success, 1 on any failure, reported as one line on stderr.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	opts := &globalOpts{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	root := newRootCmd(opts)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "logctl: %v\n", err)
		return 1
	}
	return 0
}
