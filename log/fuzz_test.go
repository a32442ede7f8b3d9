package log_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/log/logtest"
)

// validStored reports whether b is a well-formed stored batch (framing and CRC).
func validStored(b []byte) bool {
	if len(b) < 61 || 12+int64(binary.BigEndian.Uint32(b[8:])) != int64(len(b)) || b[16] != 2 {
		return false
	}
	return crc32c(b[21:]) == binary.BigEndian.Uint32(b[17:])
}

// FuzzAppend feeds arbitrary bytes to Append: it returns a typed error and
// changes nothing, or stores the batch so that Read returns it unchanged
// (but for baseOffset and leader epoch). With fixCRC the input gets a valid
// CRC first, so the fuzzer explores the framing checks behind it.
func FuzzAppend(f *testing.F) {
	good := makeBatch(batch{records: 3, maxTs: 42, payload: []byte("opaque records")})
	f.Add(good, false)
	f.Add(good[:61], true)
	f.Add(good[:30], false)
	f.Add(append(bytes.Clone(good), 1, 2, 3), true)
	f.Fuzz(func(t *testing.T, b []byte, fixCRC bool) {
		if fixCRC && len(b) >= 61 {
			b = bytes.Clone(b)
			binary.BigEndian.PutUint32(b[17:], crc32c(b[21:]))
		}
		l, err := log.Open(memDir, log.Options{FS: logtest.NewMemFS(), MaxBatchBytes: 1 << 16})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		mustAppend(t, l, good, log.AppendMeta{})
		off, err := l.Append(b, log.AppendMeta{AppliedIndex: 1})
		if err != nil {
			if !errors.Is(err, log.ErrInvalidBatch) && !errors.Is(err, log.ErrBatchTooLarge) {
				t.Fatalf("untyped error: %v", err)
			}
			if l.EndOffset() != 3 || l.AppliedIndex() != 0 {
				t.Fatal("a refused append changed the log")
			}
			return
		}
		got, err := l.Read(off, 0)
		if err != nil || !bytes.Equal(masked(got), masked(b)) || baseOffset(got) != off {
			t.Fatalf("Read(%d) = %x, %v; appended %x", off, got, err, b)
		}
	})
}

// FuzzRecover opens arbitrary bytes as the data file of the active segment
// (and, separately, of a closed one): Open never panics and either fails
// with a *CorruptionError or serves only whole valid batches, and then takes
// appends.
func FuzzRecover(f *testing.F) {
	var seed []byte
	for i := range 3 {
		b := makeBatch(batch{records: i + 1, maxTs: int64(i), payload: payload(i, 20)})
		binary.BigEndian.PutUint64(b, uint64(i*(i+1)/2))
		seed = append(seed, b...)
	}
	f.Add(seed, false)
	f.Add(seed[:len(seed)-5], false)
	f.Add(seed, true)
	f.Add([]byte{}, false)
	f.Add(make([]byte, 100), false)
	f.Fuzz(func(t *testing.T, data []byte, closed bool) {
		fsys := logtest.NewMemFS()
		opts := log.Options{FS: fsys, IndexIntervalBytes: 64}
		l, err := log.Open(memDir, opts)
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, makeBatch(batch{}), log.AppendMeta{}) // creates segment 0 and its .meta
		if closed {
			if err := l.Roll(log.AppendMeta{}); err != nil { // segment 1, based at 1
				t.Fatal(err)
			}
		}
		l.Close()
		fsys.SetData(segFile(memDir, 0, ".log"), data)
		l, err = log.Open(memDir, opts)
		if err != nil {
			if !isCorrupt(err) {
				t.Fatalf("Open: %v", err)
			}
			return
		}
		defer l.Close()
		for off := l.StartOffset(); off < l.EndOffset(); {
			b, err := l.Read(off, 1<<20)
			if err != nil {
				if !isCorrupt(err) {
					t.Fatalf("Read(%d): %v", off, err)
				}
				break
			}
			if len(b) == 0 {
				t.Fatalf("Read(%d) returned nothing", off)
			}
			for len(b) > 0 {
				n := 12 + int(binary.BigEndian.Uint32(b[8:]))
				if n > len(b) || !validStored(b[:n]) || baseOffset(b) > off {
					t.Fatalf("served an invalid batch at %d", off)
				}
				off = baseOffset(b) + int64(lastDelta(b)) + 1
				b = b[n:]
			}
		}
		if _, err := l.OffsetForTime(1); err != nil && !isCorrupt(err) {
			t.Fatalf("OffsetForTime: %v", err)
		}
		if _, err := l.Append(makeBatch(batch{}), log.AppendMeta{}); err != nil {
			t.Fatalf("Append after recovery: %v", err)
		}
	})
}
