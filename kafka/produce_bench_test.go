package kafka

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// BenchmarkCheckBatch is the Kafka listener's check of one produced batch
// (checkBatch: the header, the CRC and every record's framing), per
// batch of 1,000 records of 128 or 1,024 bytes, as kgo sends them. The
// proposer checks no CRC after it (docs/performance.md, "The Kafka
// produce path's CRCs").
func BenchmarkCheckBatch(b *testing.B) {
	for _, size := range []int{128, 1024} {
		b.Run(fmt.Sprintf("value=%d", size), func(b *testing.B) {
			values := make([]string, 1000)
			for i := range values {
				values[i] = string(make([]byte, size))
			}
			bb := records(b, values...)
			b.SetBytes(int64(len(bb)))
			cpu0 := processCPU(b)
			for b.Loop() {
				if _, code, msg := checkBatch(bb, fuzzFeatures{}, false); code != errNone {
					b.Fatal(msg)
				}
			}
			// CPU time: steadier than wall time on a shared machine.
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU returns the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
