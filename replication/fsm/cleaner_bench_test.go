package fsm

import (
	"fmt"
	"testing"

	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/log"
)

// BenchmarkCompactCodec measures compaction throughput (MB/s of input) with
// the real record codec (package batch decoding and rewriting Kafka record
// batches), which is what the cleaner runs; log's BenchmarkCompact uses a
// simpler test format. Each iteration prepares the compaction of 64 MiB of
// closed segments (100 records of ~100 bytes per batch) and discards it, so
// every iteration reads the same input: the preparation is the work the
// cleaner does beside appends, the commit in Apply is only renames.
func BenchmarkCompactCodec(b *testing.B) {
	for _, bc := range []struct {
		name string
		keys int // distinct keys; 0: every record has its own key
	}{
		{name: "keys=10000", keys: 10000},
		{name: "keys=unique"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l, err := log.Open(b.TempDir(), log.Options{SegmentBytes: 8 << 20, Sync: log.SyncNone})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			val := make([]byte, 80)
			recs := make([]batch.Record, 100)
			for i := 0; l.Size() < 64<<20; i++ {
				for j := range recs {
					n := i*len(recs) + j
					if bc.keys > 0 {
						n %= bc.keys
					}
					recs[j] = batch.Record{Timestamp: 1_700_000_000_000 + int64(i), Key: fmt.Appendf(nil, "key-%08d", n), Value: val}
				}
				bt, err := batch.Build(recs)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := l.Append(bt, log.AppendMeta{}); err != nil {
					b.Fatal(err)
				}
			}
			if err := l.Roll(log.AppendMeta{}); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(l.Size())
			b.ResetTimer()
			var st log.CompactionStats
			for range b.N {
				c, err := l.PrepareCompaction(log.CompactOptions{Below: l.EndOffset(), Codec: RecordCodec{}})
				if err != nil {
					b.Fatal(err)
				}
				st = c.Stats()
				c.Discard()
			}
			b.ReportMetric(float64(st.OutputBytes)/float64(st.InputBytes), "out/in")
		})
	}
}
