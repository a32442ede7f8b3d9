package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

type benchConsumeFlags struct {
	topic          string
	recordsPerCall int32
	maxBytes       int32
	concurrency    int
	records        int64
	duration       time.Duration
	output         string
	progress       bool
	kafka          string
	recordsMode    bool
}

func newBenchConsumeCmd(opts *globalOpts) *cobra.Command {
	var f benchConsumeFlags
	cmd := &cobra.Command{
		Use:   "consume",
		Short: "Measure fetch throughput over a pre-filled topic",
		Long: `Read a topic from its log start up to the end offsets seen at start, with
--concurrency fetches in flight (partitions are split into offset ranges when
there are more workers than partitions), and report records/s, MB/s (10^6
bytes of keys and values) and per-fetch latency. Fill the topic first, e.g.
with "logctl bench produce --keep" (without --keep it deletes its topic).

--kafka HOST:PORT reads through that node's Kafka listener with franz-go
instead of logd's API: one client fetching every partition at once
(--concurrency does not apply), latency per poll.

Fetches ask for the stored record batches, which the client decodes;
--records-mode asks for one protobuf record per record instead (what the
JSON API answers, and builds before batches did), to compare the two.`,
		Example: `  logctl bench produce --topic logctl-bench --records 100000 --keep
  logctl bench consume --topic logctl-bench --concurrency 4 -o json
  logctl bench consume --topic logctl-bench --kafka 127.0.0.1:9092`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			if f.recordsPerCall < 0 || f.maxBytes < 0 || f.concurrency < 1 || f.records < 0 || f.duration < 0 {
				return usagef("--concurrency must be positive; --records-per-call, --max-bytes, --records and --duration must not be negative")
			}
			opts.fetchRecords = f.recordsMode
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()
			d, err := c.DescribeTopic(cmd.Context(), f.topic)
			if err != nil {
				return err
			}
			tasks := splitRanges(d.Partitions, f.concurrency)
			var total int64
			for _, t := range tasks {
				total += t.to - t.from
			}
			if total == 0 {
				return fmt.Errorf("topic %s has no records; fill it first, e.g. with logctl bench produce --topic %s --keep", f.topic, f.topic)
			}
			if f.records > 0 {
				total = min(total, f.records)
			}
			prog := opts.newProgress(f.progress || isTerminal(opts.stderr), total, "records")
			prog.Start()
			var res benchResult
			if f.kafka != "" {
				res, err = benchConsumeKafka(cmd.Context(), opts, f.kafka, &f, tasks, prog)
			} else {
				res, err = benchConsume(cmd.Context(), c, &f, tasks, prog)
			}
			prog.Stop()
			if err != nil {
				return err
			}
			return printBench(opts.stdout, f.output, res)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.topic, "topic", "logctl-bench", "topic to read")
	fl.Int32Var(&f.recordsPerCall, "records-per-call", 1000, "max records per fetch (0: bounded by --max-bytes only)")
	fl.Int32Var(&f.maxBytes, "max-bytes", 0, "max bytes per fetch (0: server default)")
	fl.BoolVar(&f.recordsMode, "records-mode", false, "fetch one protobuf record per record instead of the stored batches")
	fl.StringVar(&f.kafka, "kafka", "", "read through this Kafka listener (HOST:PORT) with franz-go instead of logd's API")
	fl.IntVar(&f.concurrency, "concurrency", 8, "fetches in flight")
	fl.Int64Var(&f.records, "records", 0, "stop after this many records (0: all)")
	fl.DurationVar(&f.duration, "duration", 0, "stop after this long (0: no limit)")
	fl.BoolVar(&f.progress, "progress", false, "show progress on stderr even when it is not a terminal")
	addOutputFlag(cmd, &f.output)
	return cmd
}

// offsetRange is a half-open range [from, to) of one partition.
type offsetRange struct {
	partition int32
	from, to  int64
}

// splitRanges cuts each non-empty partition into enough ranges that about
// workers ranges exist in all.
func splitRanges(parts []client.PartitionInfo, workers int) []offsetRange {
	var nonEmpty []client.PartitionInfo
	for _, p := range parts {
		if p.End > p.LogStart {
			nonEmpty = append(nonEmpty, p)
		}
	}
	if len(nonEmpty) == 0 {
		return nil
	}
	per := max(1, (workers+len(nonEmpty)-1)/len(nonEmpty))
	var out []offsetRange
	for _, p := range nonEmpty {
		n := p.End - p.LogStart
		chunks := min(int64(per), n)
		for i := range chunks {
			out = append(out, offsetRange{
				partition: p.Partition,
				from:      p.LogStart + n*i/chunks,
				to:        p.LogStart + n*(i+1)/chunks,
			})
		}
	}
	return out
}

func benchConsume(ctx context.Context, c *client.Client, f *benchConsumeFlags, tasks []offsetRange, prog *progress) (benchResult, error) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if f.duration > 0 {
		runCtx, cancel = context.WithTimeout(ctx, f.duration)
		defer cancel()
	}
	queue := make(chan offsetRange, len(tasks))
	for _, t := range tasks {
		queue <- t
	}
	close(queue)
	var (
		records, bytes atomic.Int64
		run            = benchRun{cancel: cancel}
		wg             sync.WaitGroup
	)
	start := time.Now()
	for range f.concurrency {
		wg.Go(func() {
			var mine []time.Duration
			defer func() { run.add(mine) }()
			for t := range queue {
				for pos := t.from; pos < t.to && runCtx.Err() == nil; {
					maxRecs := f.recordsPerCall
					if left := t.to - pos; maxRecs == 0 || int64(maxRecs) > left {
						maxRecs = int32(min(left, 1<<31-1))
					}
					began := time.Now()
					resp, err := c.Fetch(runCtx, client.FetchRequest{Topic: f.topic, Partition: t.partition, Offset: pos, MaxRecords: maxRecs, MaxBytes: f.maxBytes})
					if err != nil {
						if runEnded(runCtx, err) && ctx.Err() == nil {
							return // the duration or the record count ended the run
						}
						run.fail(err)
						return
					}
					mine = append(mine, time.Since(began))
					var n, size int64
					for _, r := range resp.Records {
						if r.Offset >= t.to {
							break
						}
						n++
						size += int64(len(r.Key) + len(r.Value))
					}
					if resp.Next <= pos {
						run.fail(fmt.Errorf("fetch %s/%d at %d made no progress (next offset %d)", f.topic, t.partition, pos, resp.Next))
						return
					}
					pos = resp.Next
					bytes.Add(size)
					prog.Add(n, n, size)
					if got := records.Add(n); f.records > 0 && got >= f.records {
						cancel()
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if run.firstErr != nil {
		return benchResult{}, run.firstErr
	}
	if err := ctx.Err(); err != nil {
		return benchResult{}, fmt.Errorf("interrupted after %d records: %w", records.Load(), err)
	}
	return benchResult{Records: records.Load(), Bytes: bytes.Load(), Elapsed: elapsed, Latency: summarize(run.lats)}, nil
}
