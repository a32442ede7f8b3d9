package log_test

import (
	"fmt"
	"testing"

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
