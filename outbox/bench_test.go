package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/logd-dev/logd/outbox"
)

// fill writes n messages over 16 keys, 500 to a transaction.
func fill(b *testing.B, e env, n int) {
	b.Helper()
	ctx := context.Background()
	for done := 0; done < n; {
		tx, err := e.db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < 500 && done < n; i++ {
			if _, err := e.ob.Write(ctx, tx, outbox.Message{Topic: "bench", Key: fmt.Appendf(nil, "k%d", done%16), Value: make([]byte, 100)}); err != nil {
				b.Fatal(err)
			}
			done++
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWrite is the database's own rate of outbox inserts (500 to a
// transaction): the limit a relay's rate is measured against.
func BenchmarkWrite(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			e := newBenchEnv(b, be)
			b.ResetTimer()
			fill(b, e, b.N)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkRelay drains b.N pending rows (100-byte values, 16 keys) to
// acknowledged records.
func BenchmarkRelay(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			e := newBenchEnv(b, be)
			fill(b, e, b.N)
			r, err := e.ob.NewRelay(outbox.RelayOptions{Client: e.c, DB: e.db, PollInterval: time.Millisecond, Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			b.ResetTimer()
			go func() { done <- r.Run(ctx) }()
			for r.Stats().Relayed < uint64(b.N) {
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
