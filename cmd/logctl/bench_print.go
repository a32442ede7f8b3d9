package main

import (
	"fmt"
	"io"
	"time"
)

// printBench writes a benchmark's result as an aligned table or JSON.
func printBench(w io.Writer, output string, r benchResult) error {
	j := r.json()
	if output != outputText {
		return writeData(w, output, j)
	}
	round := func(d time.Duration) string { return fmt.Sprintf("%.3f ms", ms(d)) }
	tw := newTable(w)
	fmt.Fprintf(tw, "records\t%d\n", j.Records)
	fmt.Fprintf(tw, "duration\t%v\n", r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(tw, "records/s\t%.0f\n", j.RecordsPerSec)
	fmt.Fprintf(tw, "MB/s\t%.2f\n", j.MBPerSec)
	fmt.Fprintf(tw, "calls\t%d\n", j.Calls)
	fmt.Fprintf(tw, "latency p50\t%s\n", round(r.Latency.P50))
	fmt.Fprintf(tw, "latency p99\t%s\n", round(r.Latency.P99))
	fmt.Fprintf(tw, "latency p999\t%s\n", round(r.Latency.P999))
	fmt.Fprintf(tw, "latency max\t%s\n", round(r.Latency.Max))
	return tw.Flush()
}
