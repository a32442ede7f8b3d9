package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/logd-dev/logd/client"
)

type benchProduceFlags struct {
	topic          string
	partitions     int32
	recordSize     int
	recordsPerCall int
	concurrency    int
	records        int64
	duration       time.Duration
	rate           float64
	output         string
	progress       bool
	idemKeys       bool
	compareRounds  int
	keep           bool
	kafka          string
	// kafkaIdempotent keeps kgo's idempotent producer on (its default)
	// with --kafka; false measures the same path without producer ids.
	kafkaIdempotent bool
	// producer sends through the client's batching Producer, one record
	// per worker at a time, with linger as its Linger.
	producer bool
	linger   time.Duration
	// maxInFlight is the Producer's MaxInFlight (0: its default).
	maxInFlight int
	// slow, if positive, lists each call slower than it on stderr.
	slow time.Duration
}

func newBenchProduceCmd(opts *globalOpts) *cobra.Command {
	var f benchProduceFlags
	cmd := &cobra.Command{
		Use:   "produce",
		Short: "Measure produce throughput and per-call latency",
		Long: `Produce --records records (or for --duration) of --record-size random bytes
from --concurrency workers, --records-per-call per call, and report records/s,
MB/s (10^6 bytes of values) and per-call latency percentiles. The topic is
created with --partitions if it does not exist, and then deleted when the
benchmark ends unless --keep is given.

--rate R offers R records/s on a fixed schedule instead of as fast as
possible; latency is then measured from each call's scheduled start, so a
server that falls behind shows it (no coordinated omission). Run once
without --rate to find the peak, then at half of it.

--slow D lists every call slower than D on stderr, with the wall-clock
time (UTC) it was due to start and how long it took, so stalls can be
lined up with the server's log (snapshots, elections).

--compare-keys N measures what idempotency keys cost: after a warm-up run
of each kind (the keyed one fills the window), N rounds each produce
--records records without keys to --topic and --records with unique keys
to --topic with "-keyed" appended, in alternating order; the rounds' changes in
records/s are averaged with a 95% confidence interval. Give --records at
least the keyed topic's idempotency.max.keys, so the window is full and
every key evicts the oldest, as in steady state.

--producer sends through the Go client's batching Producer instead of
calling Produce: each of --concurrency workers sends one record and waits
for its result before the next (a service emitting one event per
request), and the Producer batches what the workers have in flight per
partition; latency is per record. --linger sets the Producer's linger
(how long records wait to go beside batches in flight; 0: not at all) and
--max-in-flight its batches in flight per partition (1: one at a time,
without a producer id).

--kafka HOST:PORT produces through that node's Kafka listener with
franz-go instead of logd's API (acks=all, uncompressed, idempotent as kgo
is by default), so the two front ends can be compared in one sitting: kgo
batches the records per partition, with up to 5 requests in flight (its
bound for an idempotent producer) and --concurrency × --records-per-call
records buffered, and latency is per record. The topic is still created
and deleted over logd's API. --kafka-idempotent=false turns kgo's
idempotent producer off (DisableIdempotentWrite), so batches carry no
producer id and skip the partitions' producer state: the two compare what
idempotence costs.`,
		Example: `  logctl bench produce --records 1000000
  logctl bench produce --topic logctl-bench --records 100000 --keep
  logctl bench produce --duration 30s --rate 50000 --output json
  logctl bench produce --duration 60s --rate 100000 --slow 20ms
  logctl bench produce --compare-keys 5 --records 1000000
  logctl bench produce --producer --concurrency 64 --duration 10s
  logctl bench produce --kafka 127.0.0.1:9092 --record-size 1024 --keep`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			if f.recordSize < 0 || f.recordsPerCall < 1 || f.concurrency < 1 || f.records < 0 || f.duration < 0 || f.rate < 0 || f.partitions < 1 {
				return usagef("--record-size must not be negative; --records-per-call, --concurrency and --partitions must be positive; --records, --duration and --rate must not be negative")
			}
			if f.duration > 0 && !cmd.Flags().Changed("records") {
				f.records = 0 // the duration alone bounds the run
			}
			if f.records == 0 && f.duration == 0 {
				return usagef("give --records or --duration")
			}
			if err := checkCompareFlags(&f); err != nil {
				return err
			}
			c, err := opts.newClient()
			if err != nil {
				return err
			}
			defer c.Close()
			topics := []string{f.topic}
			if f.compareRounds > 0 {
				topics = append(topics, f.topic+keyedTopicSuffix)
			}
			cleanup := &benchCleanup{opts: opts, c: c, keep: f.keep}
			defer func() { err = cleanup.run(cmd.Context(), err) }()
			for _, topic := range topics {
				if _, err := c.CreateTopic(cmd.Context(), topic, f.partitions, nil); err == nil {
					opts.logf("created topic %s with %s", topic, count(f.partitions, "partition"))
					cleanup.add(topic)
				} else if !errors.Is(err, client.ErrTopicExists) {
					return err
				}
			}
			var total int64
			if f.records > 0 {
				total = f.records
			}
			if f.compareRounds > 0 {
				total *= int64(2*f.compareRounds + 2)
			}
			prog := opts.newProgress(f.progress || isTerminal(opts.stderr), total, "records")
			prog.Start()
			if f.compareRounds > 0 {
				rounds, err := benchCompareKeys(cmd.Context(), c, &f, prog)
				prog.Stop()
				if err != nil {
					return err
				}
				return printCompare(opts.stdout, f.output, summarizeCompare(rounds))
			}
			var res benchResult
			if f.producer && (f.kafka != "" || f.rate > 0 || f.idemKeys || cmd.Flags().Changed("records-per-call")) {
				return usagef("--producer sends one record per worker at a time through the client's Producer: not with --kafka, --rate, --idempotency-keys or --records-per-call")
			}
			if f.kafka == "" && cmd.Flags().Changed("kafka-idempotent") {
				return usagef("--kafka-idempotent is the Kafka producer's: give --kafka")
			}
			if !f.producer && (cmd.Flags().Changed("linger") || cmd.Flags().Changed("max-in-flight")) {
				return usagef("--linger and --max-in-flight are the Producer's: give --producer")
			}
			switch {
			case f.producer:
				res, err = benchProducer(cmd.Context(), c, &f, prog)
			case f.kafka != "":
				res, err = benchProduceKafka(cmd.Context(), opts, f.kafka, &f, prog)
			default:
				res, err = benchProduce(cmd.Context(), c, &f, prog)
				printSlowCalls(opts.stderr, res.Slow)
			}
			prog.Stop()
			if err != nil {
				return err
			}
			return printBench(opts.stdout, f.output, res)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.topic, "topic", "logctl-bench", "topic to write (created if missing)")
	fl.Int32Var(&f.partitions, "partitions", 8, "partitions of the topic if it is created")
	fl.IntVar(&f.recordSize, "record-size", 128, "value bytes per record")
	fl.IntVar(&f.recordsPerCall, "records-per-call", 1000, "records per produce call")
	fl.IntVar(&f.concurrency, "concurrency", 8, "calls in flight")
	fl.Int64Var(&f.records, "records", 100_000, "records to produce in total")
	fl.DurationVar(&f.duration, "duration", 0, "run this long (with --records: whichever ends first)")
	fl.Float64Var(&f.rate, "rate", 0, "offered load in records/s (0: as fast as possible)")
	fl.BoolVar(&f.idemKeys, "idempotency-keys", false, "give every record a unique idempotency key (measures the dedup check)")
	fl.IntVar(&f.compareRounds, "compare-keys", 0, "run this many rounds without and with idempotency keys (to --topic and to --topic plus \"-keyed\") and report the difference")
	fl.DurationVar(&f.slow, "slow", 0, "list calls slower than this on stderr, with their start time (0: none)")
	fl.BoolVar(&f.progress, "progress", false, "show progress on stderr even when it is not a terminal")
	fl.StringVar(&f.kafka, "kafka", "", "produce through this Kafka listener (HOST:PORT) with franz-go instead of logd's API")
	fl.BoolVar(&f.kafkaIdempotent, "kafka-idempotent", true, "with --kafka, produce as kgo's idempotent producer (false: without producer ids)")
	fl.BoolVar(&f.producer, "producer", false, "send through the client's batching Producer, each worker one record at a time, waiting for its result")
	fl.DurationVar(&f.linger, "linger", client.DefaultLinger, "the Producer's linger, with --producer (0: none)")
	fl.IntVar(&f.maxInFlight, "max-in-flight", client.DefaultMaxInFlight, "the Producer's batches in flight per partition, with --producer")
	addKeepFlag(cmd, &f.keep)
	addOutputFlag(cmd, &f.output)
	return cmd
}

// claim takes up to n records from remaining and returns how many it got.
func claim(remaining *atomic.Int64, n int64) int64 {
	for {
		r := remaining.Load()
		if r <= 0 {
			return 0
		}
		got := min(r, n)
		if remaining.CompareAndSwap(r, r-got) {
			return got
		}
	}
}

func benchProduce(ctx context.Context, c *client.Client, f *benchProduceFlags, prog *progress) (benchResult, error) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if f.duration > 0 {
		runCtx, cancel = context.WithTimeout(ctx, f.duration)
		defer cancel()
	}
	value := make([]byte, f.recordSize)
	rand.Read(value)
	recs := make([]client.Record, f.recordsPerCall)
	for i := range recs {
		recs[i].Value = value // shared and never written: safe across workers
	}

	var remaining atomic.Int64
	remaining.Store(math.MaxInt64)
	if f.records > 0 {
		remaining.Store(f.records)
	}
	var interval time.Duration
	if f.rate > 0 {
		interval = time.Duration(float64(f.recordsPerCall) / f.rate * float64(time.Second))
	}
	keyPrefix := fmt.Sprintf("bench-%d-", time.Now().UnixNano())
	var keySeq atomic.Int64
	var (
		slot     atomic.Int64
		produced atomic.Int64
		mu       sync.Mutex
		lats     []time.Duration
		slow     []slowCall
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	for range f.concurrency {
		wg.Go(func() {
			var (
				mine []time.Duration
				key  []byte // the call's keys, one after another
				ends []int  // where each key ends in key
			)
			batch := recs
			if f.idemKeys {
				batch = make([]client.Record, len(recs))
				copy(batch, recs)
			}
			defer func() {
				mu.Lock()
				lats = append(lats, mine...)
				mu.Unlock()
			}()
			for runCtx.Err() == nil {
				n := claim(&remaining, int64(f.recordsPerCall))
				if n == 0 {
					return
				}
				began := time.Now()
				if interval > 0 {
					began = start.Add(time.Duration(slot.Add(1)-1) * interval)
					if !sleepUntil(runCtx, began) {
						return
					}
				}
				if f.idemKeys {
					key, ends = setBenchKeys(batch[:n], keyPrefix, keySeq.Add(n)-n, key, ends)
				}
				if _, err := c.Produce(runCtx, f.topic, batch[:n]); err != nil {
					if runEnded(runCtx, err) && ctx.Err() == nil {
						return // the duration ended mid-call
					}
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					return
				}
				took := time.Since(began)
				mine = append(mine, took)
				if f.slow > 0 && took > f.slow {
					mu.Lock()
					slow = append(slow, slowCall{Start: began, Took: took, Records: n})
					mu.Unlock()
				}
				produced.Add(n)
				prog.Add(n, n, n*int64(f.recordSize))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return benchResult{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return benchResult{}, fmt.Errorf("interrupted after %d records: %w", produced.Load(), err)
	}
	n := produced.Load()
	return benchResult{Records: n, Bytes: n * int64(f.recordSize), Elapsed: elapsed, Latency: summarize(lats), Slow: slow}, nil
}

// sleepUntil waits until t; it reports false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// runEnded reports whether a call failed because the run's --duration
// ended. The HTTP transport can see the deadline pass a moment before the
// context's own timer marks it done, so a deadline error counts too.
func runEnded(runCtx context.Context, err error) bool {
	if runCtx.Err() != nil {
		return true
	}
	d, ok := runCtx.Deadline()
	timedOut := errors.Is(err, context.DeadlineExceeded) || connect.CodeOf(err) == connect.CodeDeadlineExceeded
	return ok && timedOut && !time.Now().Before(d.Add(-10*time.Millisecond))
}

// setBenchKeys gives records the idempotency keys prefix+first,
// prefix+(first+1), ... One string holds them all: the client shares the
// machine with the server, and the measurement is the server's dedup
// check, not the client's allocations. buf and ends are reused scratch,
// returned for the next call.
func setBenchKeys(recs []client.Record, prefix string, first int64, buf []byte, ends []int) ([]byte, []int) {
	buf, ends = buf[:0], ends[:0]
	for i := range recs {
		buf = append(buf, prefix...)
		buf = strconv.AppendInt(buf, first+int64(i), 10)
		ends = append(ends, len(buf))
	}
	keys, start := string(buf), 0
	for i, end := range ends {
		recs[i].IdempotencyKey, start = keys[start:end], end
	}
	return buf, ends
}

// benchProducer is bench produce --producer: --concurrency workers each
// send one record through one Producer and wait for its result.
func benchProducer(ctx context.Context, c *client.Client, f *benchProduceFlags, prog *progress) (benchResult, error) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if f.duration > 0 {
		runCtx, cancel = context.WithTimeout(ctx, f.duration)
		defer cancel()
	}
	p, err := c.NewProducer(ctx, client.ProducerOptions{Topic: f.topic, Linger: cmp.Or(f.linger, -1), MaxInFlight: f.maxInFlight, BufferRecords: max(f.concurrency, client.DefaultBufferRecords)})
	if err != nil {
		return benchResult{}, err
	}
	defer p.Close()
	value := make([]byte, f.recordSize)
	rand.Read(value)
	var remaining atomic.Int64
	remaining.Store(math.MaxInt64)
	if f.records > 0 {
		remaining.Store(f.records)
	}
	var (
		produced atomic.Int64
		run      = benchRun{cancel: cancel}
		wg       sync.WaitGroup
	)
	start := time.Now()
	for range f.concurrency {
		wg.Go(func() {
			var mine []time.Duration
			defer func() { run.add(mine) }()
			for runCtx.Err() == nil && claim(&remaining, 1) == 1 {
				began := time.Now()
				ch, err := p.Send(runCtx, client.Record{Value: value})
				if err != nil {
					if runCtx.Err() == nil {
						run.fail(err)
					}
					return
				}
				// The record is sent: its result comes whether or not the
				// run ended meanwhile.
				if r := <-ch; r.Err != nil {
					run.fail(r.Err)
					return
				}
				mine = append(mine, time.Since(began))
				produced.Add(1)
				prog.Add(1, 1, int64(f.recordSize))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if run.firstErr != nil {
		return benchResult{}, run.firstErr
	}
	if err := ctx.Err(); err != nil {
		return benchResult{}, fmt.Errorf("interrupted after %d records: %w", produced.Load(), err)
	}
	n := produced.Load()
	return benchResult{Records: n, Bytes: n * int64(f.recordSize), Elapsed: elapsed, Latency: summarize(run.lats)}, nil
}
