package main

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

func newBenchCmd(opts *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure produce and consume throughput and latency",
		Long: `Measure produce, consume and work-queue throughput and latency against a
cluster. bench produce and bench queue delete the topics (and dead-letter
topics) they created when they end, even when interrupted or failed; --keep
keeps them, e.g. for a following bench consume.`,
	}
	cmd.AddCommand(newBenchProduceCmd(opts), newBenchConsumeCmd(opts), newBenchQueueCmd(opts), newBenchE2ECmd(opts))
	return cmd
}

// benchCleanupTimeout bounds the deletes after a benchmark, which run
// even when it was interrupted.
const benchCleanupTimeout = 30 * time.Second

// benchCleanup deletes the topics a benchmark created, unless --keep: a
// benchmark leaves the cluster as it found it. Topics that existed before
// are never deleted.
type benchCleanup struct {
	opts    *globalOpts
	c       *client.Client
	keep    bool
	created []string
}

// addKeepFlag adds --keep to a benchmark that creates topics.
func addKeepFlag(cmd *cobra.Command, keep *bool) {
	cmd.Flags().BoolVar(keep, "keep", false, "keep the topics the benchmark created (default: delete them when it ends)")
}

// add records a topic the benchmark created.
func (b *benchCleanup) add(topic string) { b.created = append(b.created, topic) }

// run deletes the created topics, newest first, with a context of its own
// (ctx may be cancelled by an interrupt); err is the benchmark's outcome,
// returned as it is unless it was nil and a delete failed.
func (b *benchCleanup) run(ctx context.Context, err error) error {
	if b.keep {
		for _, t := range b.created {
			b.opts.logf("kept topic %s (--keep)", t)
		}
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), benchCleanupTimeout)
	defer cancel()
	var errs []error
	for i := len(b.created) - 1; i >= 0; i-- {
		t := b.created[i]
		if derr := b.c.DeleteTopic(ctx, t); derr != nil && !errors.Is(derr, client.ErrUnknownTopic) {
			b.opts.logf("benchmark topic %s not deleted: %v", t, derr)
			errs = append(errs, derr)
			continue
		}
		b.opts.logf("deleted topic %s, created for the benchmark (--keep keeps it)", t)
	}
	if err != nil {
		return err
	}
	return errors.Join(errs...)
}
