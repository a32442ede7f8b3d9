package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// latencySummary is the distribution of per-call latencies of a benchmark.
type latencySummary struct {
	Calls int
	P50   time.Duration
	P99   time.Duration
	P999  time.Duration
	Max   time.Duration
}

// summarize sorts ds in place and returns its nearest-rank percentiles.
func summarize(ds []time.Duration) latencySummary {
	if len(ds) == 0 {
		return latencySummary{}
	}
	slices.Sort(ds)
	rank := func(q float64) time.Duration {
		i := int(q*float64(len(ds))+0.999999) - 1 // ceil(q*n)-1
		return ds[min(max(i, 0), len(ds)-1)]
	}
	return latencySummary{Calls: len(ds), P50: rank(0.50), P99: rank(0.99), P999: rank(0.999), Max: ds[len(ds)-1]}
}

// benchResult is what a benchmark reports.
type benchResult struct {
	Records int64
	Bytes   int64
	Elapsed time.Duration
	Latency latencySummary
	// Slow are the calls slower than --slow, in the order they ended.
	Slow []slowCall
}

// slowCall is one call slower than --slow: when it was due to start and
// how long it took.
type slowCall struct {
	Start   time.Time
	Took    time.Duration
	Records int64
}

// printSlowCalls lists slow calls by start time, one line each, for lining
// up with a server's log.
func printSlowCalls(w io.Writer, calls []slowCall) {
	slices.SortFunc(calls, func(a, b slowCall) int { return a.Start.Compare(b.Start) })
	for _, c := range calls {
		fmt.Fprintf(w, "slow call: start %s took %.1f ms (%s)\n", c.Start.UTC().Format("15:04:05.000"), ms(c.Took), count(c.Records, "record"))
	}
}

// benchJSON is the --output json form of a benchResult.
type benchJSON struct {
	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	Calls         int     `json:"calls"`
	LatencyMs     struct {
		P50  float64 `json:"p50"`
		P99  float64 `json:"p99"`
		P999 float64 `json:"p999"`
		Max  float64 `json:"max"`
	} `json:"latency_ms"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (r benchResult) json() benchJSON {
	secs := max(r.Elapsed.Seconds(), 1e-9)
	var j benchJSON
	j.Records, j.Bytes, j.Seconds = r.Records, r.Bytes, r.Elapsed.Seconds()
	j.RecordsPerSec = float64(r.Records) / secs
	j.MBPerSec = float64(r.Bytes) / 1e6 / secs
	j.Calls = r.Latency.Calls
	j.LatencyMs.P50, j.LatencyMs.P99 = ms(r.Latency.P50), ms(r.Latency.P99)
	j.LatencyMs.P999, j.LatencyMs.Max = ms(r.Latency.P999), ms(r.Latency.Max)
	return j
}

// benchRun is what a benchmark's workers share: their latencies, and the
// first error, which ends the run (cancel).
type benchRun struct {
	cancel   context.CancelFunc
	mu       sync.Mutex
	lats     []time.Duration
	firstErr error
}

// fail records err if it is the first, and ends the run.
func (r *benchRun) fail(err error) {
	r.mu.Lock()
	if r.firstErr == nil {
		r.firstErr = err
	}
	r.mu.Unlock()
	r.cancel()
}

// add adds a worker's latencies, when it ends.
func (r *benchRun) add(lats []time.Duration) {
	r.mu.Lock()
	r.lats = append(r.lats, lats...)
	r.mu.Unlock()
}
