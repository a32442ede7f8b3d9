package log_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/logd-dev/logd/log"
)

func benchAppend(b *testing.B, size int, policy log.SyncPolicy) {
	l, err := log.Open(b.TempDir(), log.Options{Sync: policy})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := makeBatch(batch{records: 10, payload: make([]byte, size-61)})
	b.SetBytes(int64(len(batch)))
	b.ResetTimer()
	for i := range b.N {
		if _, err := l.Append(batch, log.AppendMeta{AppliedIndex: uint64(i + 1)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppend1MiBSync: 1 MiB batches, fdatasync per append.
func BenchmarkAppend1MiBSync(b *testing.B) { benchAppend(b, 1<<20, log.SyncEveryAppend) }

// BenchmarkAppend16KiBSync: 16 KiB batches, fdatasync per append.
func BenchmarkAppend16KiBSync(b *testing.B) { benchAppend(b, 16<<10, log.SyncEveryAppend) }

// BenchmarkAppendNoSync: 16 KiB batches, SyncNone (page cache).
func BenchmarkAppendNoSync(b *testing.B) { benchAppend(b, 16<<10, log.SyncNone) }

// BenchmarkRawAppend1MiBFdatasync is the raw limit Append1MiBSync is compared
// with: a plain O_APPEND write of 1 MiB plus fdatasync.
func BenchmarkRawAppend1MiBFdatasync(b *testing.B) {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "raw"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for range b.N {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadSequential reads a 64 MiB log of 16 KiB batches from the
// page cache, 1 MiB per Read, CRCs checked.
func BenchmarkReadSequential(b *testing.B) {
	l, err := log.Open(b.TempDir(), log.Options{Sync: log.SyncNone, SegmentBytes: 16 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := makeBatch(batch{records: 10, payload: make([]byte, 16<<10-61)})
	for range (64 << 20) / len(batch) {
		if _, err := l.Append(batch, log.AppendMeta{}); err != nil {
			b.Fatal(err)
		}
	}
	var total int64
	off := int64(0)
	b.ResetTimer()
	for range b.N {
		if off == l.EndOffset() {
			off = 0
		}
		out, err := l.Read(off, 1<<20)
		if err != nil {
			b.Fatal(err)
		}
		total += int64(len(out))
		off = baseOffset(out[len(out)-len(batch):]) + 10
	}
	b.SetBytes(total / int64(b.N))
}
