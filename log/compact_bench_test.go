package log_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/log"
)

// BenchmarkCompact measures compaction throughput (prepare and commit) in
// MB/s of input: 64 MiB of 100-record batches of ~100-byte records over
// 10,000 keys, in 8 MiB segments, on the OS file system. Run it with
// -benchtime 1x: later iterations read already compacted input.
func BenchmarkCompact(b *testing.B) {
	dir := b.TempDir()
	l, err := log.Open(dir, log.Options{SegmentBytes: 8 << 20, Sync: log.SyncNone})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	val := make([]byte, 80)
	for i := 0; l.Size() < 64<<20; i++ {
		recs := make([]trec, 100)
		for j := range recs {
			recs[j] = trec{key: fmt.Sprintf("key-%05d", (i*100+j)%10000) + string(val[:60]), ts: int64(i)}
		}
		if _, err := l.Append(recBatch(recs...), log.AppendMeta{}); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Roll(log.AppendMeta{}); err != nil {
		b.Fatal(err)
	}
	input := l.Size()
	b.SetBytes(input)
	b.ResetTimer()
	for range b.N {
		c, err := l.PrepareCompaction(log.CompactOptions{Below: l.EndOffset(), Codec: testCodec{}})
		if err != nil {
			b.Fatal(err)
		}
		if err := l.CommitCompaction(c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFsyncBesidePrepare measures what a compaction's preparation does
// to another fsync on the same disk (the Raft log's, in logd): a probe
// writes 4 KiB and fdatasyncs every 5 ms while a compaction of 128 MiB of
// unique keys (so the output is as large as the input) is prepared, and
// reports the probe's p99 and max fsync latency. Modes: one sync per output
// file at the end (as before), a sync every 4 MiB, and a sync every 4 MiB
// within 32 MiB/s of I/O. Run with -benchtime 1x; the numbers depend on the
// disk and on what else uses it.
func BenchmarkFsyncBesidePrepare(b *testing.B) {
	dir := b.TempDir()
	l, err := log.Open(dir, log.Options{SegmentBytes: 32 << 20, Sync: log.SyncNone})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	val := strings.Repeat("v", 80)
	for i := 0; l.Size() < 128<<20; i++ {
		recs := make([]trec, 100)
		for j := range recs {
			recs[j] = trec{key: fmt.Sprintf("key-%09d", i*100+j) + val, ts: int64(i)}
		}
		if _, err := l.Append(recBatch(recs...), log.AppendMeta{}); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Roll(log.AppendMeta{}); err != nil {
		b.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []struct {
		name      string
		rate, syn int64
	}{
		{"sync-at-end", 0, -1},
		{"sync-every-4MiB", 0, 0},
		{"sync-every-4MiB-32MiBps", 32 << 20, 0},
	} {
		b.Run(mode.name, func(b *testing.B) {
			for range b.N {
				probe, err := os.OpenFile(filepath.Join(dir, "probe"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
				if err != nil {
					b.Fatal(err)
				}
				stop := make(chan struct{})
				done := make(chan []time.Duration)
				go func() {
					var lat []time.Duration
					buf := make([]byte, 4096)
					t := time.NewTicker(5 * time.Millisecond)
					defer t.Stop()
					for {
						select {
						case <-stop:
							done <- lat
							return
						case <-t.C:
						}
						start := time.Now()
						if _, err := probe.Write(buf); err != nil {
							panic(err)
						}
						if err := probe.Sync(); err != nil {
							panic(err)
						}
						lat = append(lat, time.Since(start))
					}
				}()
				start := time.Now()
				c, err := l.PrepareCompaction(log.CompactOptions{Below: l.EndOffset(), Codec: testCodec{}, IOBytesPerSec: mode.rate, SyncBytes: mode.syn})
				if err != nil {
					b.Fatal(err)
				}
				took := time.Since(start)
				c.Discard()
				close(stop)
				lat := <-done
				probe.Close()
				slices.Sort(lat)
				if len(lat) == 0 {
					b.Fatal("no probe fsync completed")
				}
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-fsync-ms")
				b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-fsync-ms")
				b.ReportMetric(took.Seconds(), "prepare-s")
			}
		})
	}
}
