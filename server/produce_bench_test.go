package server_test

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
)

// BenchmarkProduceIdempotencyKeys produces 128-byte values (or
// LOGD_BENCH_VALUE_BYTES), 1,000 per
// call from 8 concurrent callers, to a fresh single-node server, without
// idempotency keys and with a unique key per record: "ordered" keys share a
// prefix ("order-2026-11-29-0000001234", 27 bytes), "uuid" keys are random
// (36 bytes). ns/op is per record. The topic's window is filled to its
// bound (100k keys) first, so every key measured evicts the oldest: the
// worst case. Client and server share the process, as logctl bench and
// logd share a machine. Compare runs interleaved (-count 1, repeated): the
// disk's writeback makes runs in a row drift.
func BenchmarkProduceIdempotencyKeys(b *testing.B) {
	for _, style := range []string{"plain", "ordered", "uuid"} {
		b.Run(style, func(b *testing.B) {
			c := newBenchServer(b, "p", 8)
			ctx := context.Background()
			var seq atomic.Uint64
			value := make([]byte, benchValueBytes)
			call := func(recs []client.Record, key []byte, style string) {
				if style != "plain" {
					// One string holds the call's keys, as a producer's
					// keys would already exist: this measures the server.
					// A style's keys all have one length.
					first := seq.Add(uint64(len(recs))) - uint64(len(recs))
					var all []byte
					for i := range recs {
						key = benchKey(key, style, first+uint64(i))
						all = append(all, key...)
					}
					keys := string(all)
					for i := range recs {
						recs[i].IdempotencyKey, keys = keys[:len(key)], keys[len(key):]
					}
				}
				if _, err := c.Produce(ctx, "p", recs); err != nil {
					b.Error(err)
				}
			}
			newCall := func() []client.Record {
				recs := make([]client.Record, 1000)
				for i := range recs {
					recs[i].Value = value
				}
				return recs
			}
			// Fill the window, whatever is measured: every server then holds
			// the same state, and its live heap (which sets how often the
			// garbage collector runs) does not favour one side.
			recs, key := newCall(), make([]byte, 0, 64)
			for range 100 {
				call(recs, key, "ordered")
			}
			for i := range recs {
				recs[i].IdempotencyKey = ""
			}
			// Start with no dirty pages from earlier runs: their writeback
			// would land in this run's write calls.
			syscall.Sync()
			var next atomic.Int64
			b.ResetTimer()
			start, cpu0 := time.Now(), processCPU(b)
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					recs, key := newCall(), make([]byte, 0, 64)
					for next.Add(1000)-1000 < int64(b.N) {
						call(recs, key, style)
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
			// CPU time of client and server together: steadier than wall
			// time, which disk writeback and scheduling move by ±10%.
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/record")
		})
	}
}

// benchKey formats key number n into buf in the given style.
func benchKey(buf []byte, style string, n uint64) []byte {
	if style == "ordered" {
		buf = append(buf[:0], "order-2026-11-29-0000000000"...)
		for i := len(buf) - 1; n > 0; i, n = i-1, n/10 {
			buf[i] = byte('0' + n%10)
		}
		return buf
	}
	// A UUID's shape from two mixed words: random-looking, unique per n.
	var w [16]byte
	binary.BigEndian.PutUint64(w[:8], (n+1)*0x9e3779b97f4a7c15)
	binary.BigEndian.PutUint64(w[8:], n*0xbf58476d1ce4e5b9+1)
	var u [36]byte
	hex.Encode(u[0:8], w[0:4])
	hex.Encode(u[9:13], w[4:6])
	hex.Encode(u[14:18], w[6:8])
	hex.Encode(u[19:23], w[8:10])
	hex.Encode(u[24:36], w[10:16])
	u[8], u[13], u[18], u[23] = '-', '-', '-', '-'
	return append(buf[:0], u[:]...)
}

// benchValueBytes is the value size BenchmarkProduceIdempotencyKeys
// produces: LOGD_BENCH_VALUE_BYTES, default 128.
var benchValueBytes = func() int {
	if n, err := strconv.Atoi(os.Getenv("LOGD_BENCH_VALUE_BYTES")); err == nil && n >= 0 {
		return n
	}
	return 128
}()

// processCPU returns the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
