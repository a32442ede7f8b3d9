// Package recordtest builds record batches and reads partition logs back,
// for the tests of replication and replication/fsm. It imports log and
// batch only, so the state machine's own tests can use it without an
// import cycle.
package recordtest

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/log"
)

// Batch builds a batch of records with the given values and increasing
// timestamps from 1,700,000,000,000 ms.
func Batch(t testing.TB, values ...string) []byte {
	t.Helper()
	recs := make([]batch.Record, len(values))
	for i, v := range values {
		recs[i] = batch.Record{Timestamp: 1_700_000_000_000 + int64(i), Value: []byte(v)}
	}
	return build(t, recs)
}

// ProducerBatch is Batch as an idempotent Kafka producer sends it: from
// producer id at epoch, its first sequence seq.
func ProducerBatch(t testing.TB, id int64, epoch int16, seq int32, values ...string) []byte {
	t.Helper()
	b := Batch(t, values...)
	binary.BigEndian.PutUint64(b[43:], uint64(id))
	binary.BigEndian.PutUint16(b[51:], uint16(epoch))
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// KeyedBatch builds a batch of key, value pairs at timestamp ts (ms); the
// value "<nil>" is a null value (a tombstone for compaction).
func KeyedBatch(t testing.TB, ts int64, kv ...string) []byte {
	t.Helper()
	var recs []batch.Record
	for i := 0; i < len(kv); i += 2 {
		r := batch.Record{Timestamp: ts, Key: []byte(kv[i])}
		if kv[i+1] != "<nil>" {
			r.Value = []byte(kv[i+1])
		}
		recs = append(recs, r)
	}
	return build(t, recs)
}

// JobBatch builds queue jobs stamped at now (Unix ns): each record has key
// "k-<value>" and a "job" header; values "late:*" also carry a deadline
// header one second after now.
func JobBatch(t testing.TB, now int64, values ...string) []byte {
	t.Helper()
	recs := make([]batch.Record, len(values))
	for i, v := range values {
		recs[i] = batch.Record{Timestamp: now / 1e6, Key: []byte("k-" + v), Value: []byte(v), Headers: []batch.Header{{Key: "job", Value: []byte(v)}}}
		if strings.HasPrefix(v, "late:") {
			recs[i].Headers = append(recs[i].Headers, batch.Header{Key: "deadline", Value: []byte(fmt.Sprint((now + int64(time.Second)) / 1e6))})
		}
	}
	return build(t, recs)
}

func build(t testing.TB, recs []batch.Record) []byte {
	t.Helper()
	b, err := batch.Build(recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Values returns every record value of a log in offset order, failing the
// test unless the offsets are dense from 0.
func Values(t testing.TB, l *log.Log) []string {
	t.Helper()
	var out []string
	each(t, l, func(r batch.Record) {
		if r.Offset != int64(len(out)) {
			t.Fatalf("record at offset %d, want %d", r.Offset, len(out))
		}
		out = append(out, string(r.Value))
	})
	return out
}

// KeyValues lists a log's records as "offset:key=value" ("<nil>" for a
// null value), over the gaps compaction leaves.
func KeyValues(t testing.TB, l *log.Log) []string {
	t.Helper()
	var out []string
	each(t, l, func(r batch.Record) {
		v := string(r.Value)
		if r.Value == nil {
			v = "<nil>"
		}
		out = append(out, fmt.Sprintf("%d:%s=%s", r.Offset, r.Key, v))
	})
	return out
}

// each calls fn for every record of l, reading batch by batch and moving
// past each batch by its header, so batches emptied by compaction are
// stepped over.
func each(t testing.TB, l *log.Log, fn func(batch.Record)) {
	t.Helper()
	for off := l.StartOffset(); off < l.EndOffset(); {
		data, err := l.Read(off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := batch.Records(data, off, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			fn(r)
		}
		for rest := data; len(rest) > 0; {
			info, err := batch.Peek(rest)
			if err != nil {
				t.Fatal(err)
			}
			off = info.NextOffset()
			rest = rest[info.Length:]
		}
	}
}
