package log_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/logd-dev/logd/log"
)

// TestMain fails the package if a test leaves a goroutine running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batch describes a test batch; makeBatch encodes it as a Kafka RecordBatch v2.
type batch struct {
	records int    // recordCount (lastOffsetDelta = records-1); default 1
	maxTs   int64  // maxTimestamp (also baseTimestamp)
	payload []byte // opaque "records" bytes
}

func makeBatch(b batch) []byte {
	if b.records == 0 {
		b.records = 1
	}
	buf := make([]byte, 61+len(b.payload))
	binary.BigEndian.PutUint64(buf[0:], 12345) // baseOffset: rewritten by the log
	binary.BigEndian.PutUint32(buf[8:], uint32(len(buf)-12))
	binary.BigEndian.PutUint32(buf[12:], 7) // leader epoch: rewritten by the log
	buf[16] = 2
	binary.BigEndian.PutUint16(buf[21:], 0)
	binary.BigEndian.PutUint32(buf[23:], uint32(b.records-1))
	binary.BigEndian.PutUint64(buf[27:], uint64(b.maxTs))
	binary.BigEndian.PutUint64(buf[35:], uint64(b.maxTs))
	binary.BigEndian.PutUint64(buf[43:], ^uint64(0)) // producerId -1
	binary.BigEndian.PutUint16(buf[51:], 0xffff)
	binary.BigEndian.PutUint32(buf[53:], 0xffffffff)
	binary.BigEndian.PutUint32(buf[57:], uint32(b.records))
	copy(buf[61:], b.payload)
	binary.BigEndian.PutUint32(buf[17:], crc32.Checksum(buf[21:], castagnoli))
	return buf
}

// payload returns n bytes that identify i.
func payload(i, n int) []byte {
	p := bytes.Repeat([]byte{byte(i)}, n)
	copy(p, fmt.Sprintf("value-%d;", i))
	return p
}

// stored is what the log serves for batch b appended at offset with a
// given applied-index delta: b with baseOffset and leader epoch rewritten.
func stored(b []byte, offset int64, epoch uint32) []byte {
	out := bytes.Clone(b)
	binary.BigEndian.PutUint64(out[0:], uint64(offset))
	binary.BigEndian.PutUint32(out[12:], epoch)
	return out
}

// splitBatches splits Read output into batches (and checks their framing).
func splitBatches(t testing.TB, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 61 {
			t.Fatalf("trailing %d bytes", len(b))
		}
		n := 12 + int(binary.BigEndian.Uint32(b[8:]))
		if n > len(b) {
			t.Fatalf("batch of %d bytes, %d left", n, len(b))
		}
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

func baseOffset(b []byte) int64 { return int64(binary.BigEndian.Uint64(b)) }

// clock is an injectable clock.
type clock struct{ t time.Time }

func newClock() *clock                         { return &clock{t: time.Unix(1_700_000_000, 0)} }
func (c *clock) Now() time.Time                { return c.t }
func (c *clock) Add(d time.Duration)           { c.t = c.t.Add(d) }
func (c *clock) meta(ai uint64) log.AppendMeta { return log.AppendMeta{AppliedIndex: ai, Time: c.t} }

func mustOpen(t testing.TB, dir string, opts log.Options) *log.Log {
	t.Helper()
	l, err := log.Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func mustAppend(t testing.TB, l *log.Log, b []byte, meta log.AppendMeta) int64 {
	t.Helper()
	off, err := l.Append(b, meta)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return off
}

// readAll reads every batch from StartOffset to EndOffset.
func readAll(t testing.TB, l *log.Log) [][]byte {
	t.Helper()
	var out [][]byte
	for off := l.StartOffset(); off < l.EndOffset(); {
		b, err := l.Read(off, 1<<20)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		bs := splitBatches(t, b)
		if len(bs) == 0 {
			t.Fatalf("Read(%d) returned nothing before EndOffset %d", off, l.EndOffset())
		}
		for _, x := range bs {
			if got := baseOffset(x); got != off {
				t.Fatalf("batch at %d, want %d", got, off)
			}
			off += int64(binary.BigEndian.Uint32(x[23:])) + 1
			out = append(out, x)
		}
	}
	return out
}

func segFile(dir string, base int64, ext string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, ext))
}

func isCorrupt(err error) bool {
	var ce *log.CorruptionError
	return errors.As(err, &ce) && errors.Is(err, log.ErrCorrupt)
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
