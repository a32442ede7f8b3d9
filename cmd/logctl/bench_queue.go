package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

type benchQueueFlags struct {
	topic       string
	group       string
	partitions  int32
	records     int64
	recordSize  int
	workers     int
	batch       int
	lease       time.Duration
	fillBatch   int
	fillWorkers int
	output      string
	progress    bool
	// endToEnd produces while the workers run and measures each record
	// from its producer's send time to its ack; rate paces the producers
	// (records/s, 0: as fast as they go).
	endToEnd bool
	rate     float64
	keep     bool
}

func newBenchQueueCmd(opts *globalOpts) *cobra.Command {
	var f benchQueueFlags
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "Measure work-queue claim+ack throughput and latency",
		Long: `Fill a fresh topic with --records records of --record-size bytes, create a
queue group on it, then run --workers workers that each claim up to --batch
records and acknowledge them all in one ack call, until every record is
acknowledged. Every claim and every ack is a Raft command, fsynced before
its reply.

Reported: claim+ack throughput (records acknowledged per second) and the
latency of each claim→ack cycle (a worker's claim call start to its ack
call end, i.e. how long a record takes from being handed out to being
durably done when the handler itself takes no time), with the claim and
ack call latencies separately.

--end-to-end instead creates the queue group first and runs the producers
(--fill-workers calls of --fill-batch records) concurrently with the
workers, optionally paced by --rate records/s. Each record carries its
producer's send time (as its timestamp, and in nanoseconds in its first 8
value bytes), and the produce→ack latency of every record (its ack reply
minus that time) is reported: queueing, the produce, the claim and the ack,
every step fsynced. Without --rate the producers outrun the workers and the
latency is mostly the backlog's age; measure the peak first, then set
--rate below it.

The topic and the dead-letter topic its queue group created are deleted
when the benchmark ends, unless --keep is given.`,
		Example: `  logctl bench queue --records 500000 --workers 8 --batch 500
  logctl bench queue --workers 1 --batch 1 --records 20000 --output json
  logctl bench queue --end-to-end --rate 20000 --records 200000 --batch 100`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			if f.records < 1 || f.workers < 1 || f.batch < 1 || f.batch > 10000 || f.recordSize < 0 || f.partitions < 1 || f.fillBatch < 1 || f.fillWorkers < 1 {
				return usagef("--records, --workers, --partitions, --fill-batch and --fill-workers must be positive, --batch in [1, 10000], --record-size not negative")
			}
			if f.rate < 0 || f.rate > 0 && !f.endToEnd {
				return usagef("--rate must not be negative, and paces only --end-to-end producers")
			}
			if f.endToEnd && f.recordSize < 8 {
				return usagef("--end-to-end needs --record-size of at least 8 (the send time)")
			}
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx := cmd.Context()
			if f.topic == "" {
				f.topic = fmt.Sprintf("logctl-bench-queue-%d", time.Now().UnixMilli())
			}
			if _, err := c.CreateTopic(ctx, f.topic, f.partitions, nil); err != nil {
				return err
			}
			cleanup := &benchCleanup{opts: opts, c: c, keep: f.keep}
			defer func() { err = cleanup.run(ctx, err) }()
			cleanup.add(f.topic)
			if !f.endToEnd {
				opts.logf("filling topic %s (%d partitions) with %d records of %d bytes", f.topic, f.partitions, f.records, f.recordSize)
				if err := benchQueueFill(ctx, c, &f, nil); err != nil {
					return err
				}
			}
			inFlight := max(1000, (f.workers*f.batch+int(f.partitions)-1)/int(f.partitions)*2)
			before, err := c.ListTopics(ctx)
			if err != nil {
				return err
			}
			cfg, err := c.CreateQueueGroup(ctx, f.topic, f.group, client.QueueGroupConfig{Lease: f.lease, MaxInFlight: min(inFlight, 100_000)}, false)
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(before, func(t client.Topic) bool { return t.Name == cfg.DeadLetterTopic }) {
				// The group created its dead-letter topic; the topic's
				// deletion takes the queue group but not that.
				cleanup.add(cfg.DeadLetterTopic)
			}
			prog := opts.newProgress(f.progress || isTerminal(opts.stderr), f.records, "records")
			prog.Start()
			res, err := benchQueue(ctx, c, &f, prog)
			prog.Stop()
			if err != nil {
				return err
			}
			return printBenchQueue(opts.stdout, f.output, &f, res)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.topic, "topic", "", "topic to create and fill (default a fresh logctl-bench-queue-<ms>)")
	fl.StringVar(&f.group, "group", "bench", "queue group name")
	fl.Int32Var(&f.partitions, "partitions", 4, "partitions of the topic")
	fl.Int64Var(&f.records, "records", 200_000, "records to fill and then claim and ack")
	fl.IntVar(&f.recordSize, "record-size", 128, "value bytes per record")
	fl.IntVar(&f.workers, "workers", 8, "concurrent workers, each claiming and acking")
	fl.IntVar(&f.batch, "batch", 500, "records per claim (and per ack call)")
	fl.DurationVar(&f.lease, "lease", time.Minute, "lease of each claim")
	fl.IntVar(&f.fillBatch, "fill-batch", 5000, "records per produce call while filling")
	fl.IntVar(&f.fillWorkers, "fill-workers", 4, "produce calls in flight while filling")
	fl.BoolVar(&f.progress, "progress", false, "show progress on stderr even when it is not a terminal")
	addKeepFlag(cmd, &f.keep)
	fl.BoolVar(&f.endToEnd, "end-to-end", false, "produce while the workers run and measure each record's produce→ack latency")
	fl.Float64Var(&f.rate, "rate", 0, "with --end-to-end: offered load in records/s (0: as fast as possible)")
	addOutputFlag(cmd, &f.output)
	return cmd
}

// benchQueueFill produces f.records records with --fill-workers calls in
// flight. With start set (--end-to-end) each call is sent on the --rate
// schedule from start, and its records carry the send time.
func benchQueueFill(ctx context.Context, c *client.Client, f *benchQueueFlags, start *time.Time) error {
	value := make([]byte, f.recordSize)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, f.fillWorkers)
	for range f.fillWorkers {
		wg.Go(func() {
			for {
				from := next.Add(int64(f.fillBatch)) - int64(f.fillBatch)
				if from >= f.records || ctx.Err() != nil {
					return
				}
				n := min(int64(f.fillBatch), f.records-from)
				recs := make([]client.Record, n)
				for i := range recs {
					recs[i] = client.Record{Value: value}
				}
				if start != nil {
					if f.rate > 0 && !sleepUntil(ctx, start.Add(time.Duration(float64(from)/f.rate*float64(time.Second)))) {
						return
					}
					sent := time.Now()
					v := slices.Clone(value)
					binary.BigEndian.PutUint64(v, uint64(sent.UnixNano()))
					for i := range recs {
						recs[i] = client.Record{Value: v, Timestamp: sent}
					}
				}
				if _, err := c.Produce(ctx, f.topic, recs); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

type benchQueueResult struct {
	records  int64
	bytes    int64
	claims   int64
	elapsed  time.Duration
	cycle    latencySummary
	claimLat latencySummary
	ackLat   latencySummary
	// e2e: each record's send time to its ack (--end-to-end).
	e2e latencySummary
}

func benchQueue(ctx context.Context, c *client.Client, f *benchQueueFlags, prog *progress) (benchQueueResult, error) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		acked, bytes, claims atomic.Int64
		mu                   sync.Mutex
		cycles, cls, acks    []time.Duration
		e2es                 []time.Duration
		firstErr             error
		wg                   sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel()
	}
	start := time.Now()
	if f.endToEnd {
		wg.Go(func() {
			if err := benchQueueFill(runCtx, c, f, &start); err != nil && runCtx.Err() == nil {
				fail(err)
			}
		})
	}
	for range f.workers {
		wg.Go(func() {
			var myCycles, myClaims, myAcks, myE2E []time.Duration
			defer func() {
				mu.Lock()
				cycles, cls, acks = append(cycles, myCycles...), append(cls, myClaims...), append(acks, myAcks...)
				e2es = append(e2es, myE2E...)
				mu.Unlock()
			}()
			for runCtx.Err() == nil && acked.Load() < f.records {
				began := time.Now()
				res, err := c.Claim(runCtx, client.ClaimRequest{Topic: f.topic, Group: f.group, MaxRecords: f.batch, Lease: f.lease, MaxWait: 100 * time.Millisecond})
				if err != nil {
					if runCtx.Err() == nil {
						fail(err)
					}
					return
				}
				claims.Add(1)
				claimed := time.Now()
				if len(res.Jobs) == 0 {
					continue // others hold the rest; wait for them to finish
				}
				tokens := make([]string, len(res.Jobs))
				var size int64
				for i, j := range res.Jobs {
					tokens[i] = j.Token
					size += int64(len(j.Value) + len(j.Key))
				}
				if _, err := c.Ack(runCtx, f.topic, f.group, tokens...); err != nil {
					if runCtx.Err() == nil {
						fail(err)
					}
					return
				}
				done := time.Now()
				if f.endToEnd {
					for _, j := range res.Jobs {
						if len(j.Value) >= 8 {
							myE2E = append(myE2E, done.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(j.Value)))))
						}
					}
				}
				myClaims = append(myClaims, claimed.Sub(began))
				myAcks = append(myAcks, done.Sub(claimed))
				myCycles = append(myCycles, done.Sub(began))
				n := int64(len(res.Jobs))
				bytes.Add(size)
				prog.Add(n, n, size)
				if acked.Add(n) >= f.records {
					cancel()
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return benchQueueResult{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return benchQueueResult{}, fmt.Errorf("interrupted after %d records: %w", acked.Load(), err)
	}
	return benchQueueResult{records: acked.Load(), bytes: bytes.Load(), claims: claims.Load(), elapsed: elapsed,
		cycle: summarize(cycles), claimLat: summarize(cls), ackLat: summarize(acks), e2e: summarize(e2es)}, nil
}

func printBenchQueue(w io.Writer, output string, f *benchQueueFlags, r benchQueueResult) error {
	secs := max(r.elapsed.Seconds(), 1e-9)
	lat := func(s latencySummary) map[string]float64 {
		return map[string]float64{"p50": ms(s.P50), "p99": ms(s.P99), "p999": ms(s.P999), "max": ms(s.Max)}
	}
	if output != outputText {
		out := map[string]any{
			"records": r.records, "seconds": r.elapsed.Seconds(), "acks_per_sec": float64(r.records) / secs,
			"mb_per_sec": float64(r.bytes) / 1e6 / secs, "workers": f.workers, "batch": f.batch, "claim_calls": r.claims,
			"cycle_latency_ms": lat(r.cycle), "claim_latency_ms": lat(r.claimLat), "ack_latency_ms": lat(r.ackLat),
			"end_to_end": f.endToEnd,
		}
		if f.endToEnd {
			out["produce_to_ack_latency_ms"], out["rate"] = lat(r.e2e), f.rate
		}
		return writeData(w, output, out)
	}
	tw := newTable(w)
	row := func(name string, s latencySummary) {
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%.3f ms\n", name, ms(s.P50), ms(s.P99), ms(s.P999), ms(s.Max))
	}
	fmt.Fprintf(tw, "records acked\t%d\n", r.records)
	fmt.Fprintf(tw, "duration\t%v\n", r.elapsed.Round(time.Millisecond))
	fmt.Fprintf(tw, "claim+ack/s\t%.0f\n", float64(r.records)/secs)
	fmt.Fprintf(tw, "MB/s\t%.2f\n", float64(r.bytes)/1e6/secs)
	fmt.Fprintf(tw, "workers x batch\t%d x %d\n", f.workers, f.batch)
	fmt.Fprintf(tw, "claim calls\t%d\n", r.claims)
	if f.endToEnd {
		rate := "unpaced"
		if f.rate > 0 {
			rate = fmt.Sprintf("%.0f records/s", f.rate)
		}
		fmt.Fprintf(tw, "producers\tconcurrent, %s\n", rate)
	}
	fmt.Fprintf(tw, "latency\tp50\tp99\tp999\tmax\n")
	if f.endToEnd {
		row("produce→ack", r.e2e)
	}
	row("claim→ack cycle", r.cycle)
	row("claim call", r.claimLat)
	row("ack call", r.ackLat)
	return tw.Flush()
}
