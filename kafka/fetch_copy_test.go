package kafka

import (
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/batch"
)

// fetchCopyBench is a partition of big batches and a connection that
// fetches it whole, reading each response into one reused buffer, so that
// what the process allocates per fetch is the server's.
type fetchCopyBench struct {
	tn     *testNode
	c      *rawClient
	req    []byte
	buf    []byte
	served int64
}

// newFetchCopyBench stores batches of 64 KiB in one partition, totalling
// 1 MiB, and checks a fetch gets them all.
func newFetchCopyBench(tb testing.TB) *fetchCopyBench {
	tb.Helper()
	tn := startNode(tb)
	tn.createTopic("big", 1, nil)
	c := dial(tb, tn.addr)
	const batches, perBatch, value = 16, 16, 4 << 10
	for i := range batches {
		recs := make([]batch.Record, perBatch)
		for j := range recs {
			v := make([]byte, value)
			for k := range v {
				v[k] = byte(i*7 + j*13 + k) // not compressed anyway; distinct
			}
			recs[j] = batch.Record{Timestamp: time.Now().UnixMilli(), Key: fmt.Appendf(nil, "%d-%d", i, j), Value: v}
		}
		b, err := batch.Build(recs)
		if err != nil {
			tb.Fatal(err)
		}
		if code, _ := produceCode(tb, c.do(produceReq(9, -1, "big", 0, b))); code != 0 {
			tb.Fatalf("produce: %s", errorName(code))
		}
	}
	req := fetchReq(11, "big", 0, 0, 0, 1, 8<<20)
	req.Topics[0].Partitions[0].PartitionMaxBytes = 8 << 20
	p := fetchPart(tb, c.do(req))
	if p.ErrorCode != 0 || p.HighWatermark != batches*perBatch {
		tb.Fatalf("fetch: code %s, high watermark %d", errorName(p.ErrorCode), p.HighWatermark)
	}
	if _, err := batch.DecodeAll(p.RecordBatches); err != nil {
		tb.Fatalf("served batches: %v", err)
	}
	f := &fetchCopyBench{tn: tn, c: c, served: int64(len(p.RecordBatches))}
	c.corr++
	f.req = kmsg.NewRequestFormatter(kmsg.FormatterClientID("logd-test")).AppendRequest(nil, req, c.corr)
	return f
}

// fetch sends the fetch and reads its answer into f.buf.
func (f *fetchCopyBench) fetch(tb testing.TB) {
	f.c.conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := f.c.conn.Write(f.req); err != nil {
		tb.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(f.c.br, size[:]); err != nil {
		tb.Fatal(err)
	}
	n := int(binary.BigEndian.Uint32(size[:]))
	if n < int(f.served) || n > int(f.served)+1<<16 {
		tb.Fatalf("response of %d bytes for %d bytes of batches", n, f.served)
	}
	if cap(f.buf) < n {
		f.buf = make([]byte, n)
	}
	if _, err := io.ReadFull(f.c.br, f.buf[:n]); err != nil {
		tb.Fatal(err)
	}
}

// allocatedPerServed fetches rounds times and returns the bytes the
// process allocated per batch byte served.
func (f *fetchCopyBench) allocatedPerServed(tb testing.TB, rounds int) float64 {
	f.fetch(tb) // warm up: the reused buffers grow once
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range rounds {
		f.fetch(tb)
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(int64(rounds)*f.served)
}

// TestFetchCopiesOnce: serving a fetch allocates about one byte per batch
// byte served, the copy the backend reads from the log (the page cache)
// into, and no second one for the response: the response is written
// around the stored bytes (fetch_frame.go). A second copy would make it
// two.
func TestFetchCopiesOnce(t *testing.T) {
	f := newFetchCopyBench(t)
	if got := f.allocatedPerServed(t, 20); got > 1.5 {
		t.Fatalf("%.2f bytes allocated per batch byte served; want about 1 (one copy)", got)
	} else {
		t.Logf("%.2f bytes allocated per batch byte served (%d bytes a fetch)", got, f.served)
	}
}

// BenchmarkFetchCopies fetches 1 MiB of 64 KiB batches of one partition
// per op and reports the bytes allocated per batch byte served
// (alloc-B/served-B): 1 means one copy.
func BenchmarkFetchCopies(b *testing.B) {
	f := newFetchCopyBench(b)
	f.fetch(b)
	b.SetBytes(f.served)
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for b.Loop() {
		f.fetch(b)
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(int64(b.N)*f.served), "alloc-B/served-B")
}
