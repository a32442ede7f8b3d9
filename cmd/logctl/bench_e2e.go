package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

type benchE2EFlags struct {
	topic          string
	partitions     int32
	recordSize     int
	recordsPerCall int
	rate           float64
	duration       time.Duration
	output         string
	keep           bool
}

// e2eStampBytes is the send time each record's value starts with.
const e2eStampBytes = 8

func newBenchE2ECmd(opts *globalOpts) *cobra.Command {
	var f benchE2EFlags
	cmd := &cobra.Command{
		Use:   "e2e",
		Short: "Measure the latency from produce to a consumer's long poll",
		Long: `Produce --rate records/s on a fixed schedule for --duration, in calls of
--records-per-call, while one consumer per partition long-polls Fetch from
the partition's end, and report the end-to-end latency of each record:
from the moment its call was due to start (so a server that falls behind
shows it, with no coordinated omission) to the moment a consumer held it.
Producer and consumers run in this process, on one clock. Latency and
calls are per record.

Run bench produce first to find the peak, then this at a fraction of it
(docs/performance.md measures it at half of the peak).`,
		Example: `  logctl bench e2e --rate 50000 --duration 10s
  logctl bench e2e --rate 1000 --records-per-call 1 --partitions 1 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			if f.recordSize < e2eStampBytes || f.recordsPerCall < 1 || f.partitions < 1 || f.rate <= 0 || f.duration <= 0 {
				return usagef("--record-size must be at least %d (the send time); --records-per-call, --partitions, --rate and --duration must be positive", e2eStampBytes)
			}
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()
			cleanup := &benchCleanup{opts: opts, c: c, keep: f.keep}
			defer func() { err = cleanup.run(cmd.Context(), err) }()
			if _, err := c.CreateTopic(cmd.Context(), f.topic, f.partitions, nil); err == nil {
				opts.logf("created topic %s with %s", f.topic, count(f.partitions, "partition"))
				cleanup.add(f.topic)
			} else if !errors.Is(err, client.ErrTopicExists) {
				return err
			}
			res, err := benchE2E(cmd.Context(), c, &f)
			if err != nil {
				return err
			}
			return printBench(opts.stdout, f.output, res)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.topic, "topic", "logctl-bench-e2e", "topic to write and read (created if missing)")
	fl.Int32Var(&f.partitions, "partitions", 8, "partitions of the topic if it is created")
	fl.IntVar(&f.recordSize, "record-size", 128, "value bytes per record (at least 8: the send time)")
	fl.IntVar(&f.recordsPerCall, "records-per-call", 100, "records per produce call")
	fl.Float64Var(&f.rate, "rate", 10_000, "offered load in records/s")
	fl.DurationVar(&f.duration, "duration", 10*time.Second, "how long to produce")
	addKeepFlag(cmd, &f.keep)
	addOutputFlag(cmd, &f.output)
	return cmd
}

// e2eProducers bounds the produce calls in flight: a late call does not
// hold back the ones after it.
const e2eProducers = 16

// e2eDrain is how long the consumers wait for the last records after
// the producers stopped.
const e2eDrain = 10 * time.Second

func benchE2E(ctx context.Context, c *client.Client, f *benchE2EFlags) (benchResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Start each consumer at its partition's end, before anything is
	// produced.
	d, err := c.DescribeTopic(ctx, f.topic)
	if err != nil {
		return benchResult{}, err
	}
	// A consumer for every partition the topic has (it may have existed
	// with another count than --partitions).
	parts := d.Topic.Partitions
	starts := make([]int64, parts)
	for _, p := range d.Partitions {
		starts[p.Partition] = p.End
	}
	var (
		run      = benchRun{cancel: cancel}
		sent     atomic.Int64
		received atomic.Int64
		stopped  = make(chan struct{}) // the producers are done
	)
	var consumers sync.WaitGroup
	for p := range parts {
		consumers.Go(func() {
			var mine []time.Duration
			defer func() { run.add(mine) }()
			off := starts[p]
			var drainBy time.Time
			for ctx.Err() == nil {
				select {
				case <-stopped:
					if drainBy.IsZero() {
						drainBy = time.Now().Add(e2eDrain)
					}
					if received.Load() >= sent.Load() || time.Now().After(drainBy) {
						return
					}
				default:
				}
				res, err := c.Fetch(ctx, client.FetchRequest{Topic: f.topic, Partition: p, Offset: off, MaxWait: 100 * time.Millisecond})
				if err != nil {
					if ctx.Err() == nil {
						run.fail(fmt.Errorf("fetch partition %d at %d: %w", p, off, err))
					}
					return
				}
				now := time.Now()
				for _, r := range res.Records {
					if len(r.Value) >= e2eStampBytes {
						mine = append(mine, now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))))
					}
				}
				received.Add(int64(len(res.Records)))
				off = res.Next
			}
		})
	}

	interval := time.Duration(float64(f.recordsPerCall) / f.rate * float64(time.Second))
	start := time.Now()
	end := start.Add(f.duration)
	var slot atomic.Int64
	var producers sync.WaitGroup
	for range e2eProducers {
		producers.Go(func() {
			recs := make([]client.Record, f.recordsPerCall)
			for i := range recs {
				recs[i].Value = make([]byte, f.recordSize)
			}
			for ctx.Err() == nil {
				due := start.Add(time.Duration(slot.Add(1)-1) * interval)
				if !due.Before(end) || !sleepUntil(ctx, due) {
					return
				}
				for i := range recs {
					binary.BigEndian.PutUint64(recs[i].Value, uint64(due.UnixNano()))
				}
				if _, err := c.Produce(ctx, f.topic, recs); err != nil {
					if ctx.Err() == nil {
						run.fail(fmt.Errorf("produce: %w", err))
					}
					return
				}
				sent.Add(int64(len(recs)))
			}
		})
	}
	producers.Wait()
	close(stopped)
	consumers.Wait()
	elapsed := time.Since(start)
	if run.firstErr != nil {
		return benchResult{}, run.firstErr
	}
	if err := ctx.Err(); err != nil {
		return benchResult{}, fmt.Errorf("interrupted after %d records: %w", received.Load(), err)
	}
	if n, want := received.Load(), sent.Load(); n < want {
		return benchResult{}, fmt.Errorf("the consumers saw %d of the %d records produced within %v of the end", n, want, e2eDrain)
	}
	n := received.Load()
	return benchResult{Records: n, Bytes: n * int64(f.recordSize), Elapsed: elapsed, Latency: summarize(run.lats)}, nil
}
