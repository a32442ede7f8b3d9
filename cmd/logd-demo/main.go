// Command demo is logd's walk-through (`make demo`): it starts a real
// single-node logd (the bin/logd binary, as a subprocess, in a temporary
// directory on free ports) and runs, with assertions and readable output,
// the stories logd exists for: consumer groups replaying independently and
// an offset reset; a crashed credit worker and the idempotent handler that
// makes redelivery harmless; a stale ack refused after its lease expired; a
// poison job dead-lettered while the jobs behind it complete, then
// redriven; a burst refused by admission control; and a produce retried
// after an ambiguous failure that returns the original offset.
//
// It exits 1 if any observation fails, and removes its files and stops its
// process either way.
//
//	go run ./cmd/logd-demo [--logd bin/logd] [-v]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	fs := flag.NewFlagSet("logd-demo", flag.ExitOnError)
	bin := fs.String("logd", "", "logd binary to run (default: build ./cmd/logd into the temporary directory)")
	verbose := fs.Bool("v", false, "print logd's output when a story fails")
	fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Stdout, config{logd: *bin, verbose: *verbose})
	if err != nil {
		fmt.Fprintln(os.Stderr, "logd-demo:", err)
		stop()
		os.Exit(1)
	}
}
