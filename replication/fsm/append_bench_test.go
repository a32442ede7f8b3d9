package fsm

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/dedup"
	"github.com/logd-dev/logd/log"
)

// benchAppends builds n Append commands of recs records of size bytes
// each to topic "b", spread over parts partitions; keyed gives every
// record a unique idempotency key shaped like logctl bench's.
func benchAppends(b *testing.B, n, recs, parts, size int, keyed bool) []Append {
	b.Helper()
	value := make([]byte, size)
	out := make([]Append, n)
	seq := 0
	for i := range out {
		a := Append{Topic: "b"}
		for p := range parts {
			per := recs / parts
			rs := make([]batch.Record, per)
			var keys []RecordKey
			for j := range rs {
				rs[j] = batch.Record{Timestamp: 1_700_000_000_000, Value: value}
				if keyed {
					k := "bench-1764432000000000000-" + strconv.Itoa(seq)
					keys = append(keys, RecordKey{Index: int32(j), Key: k, Digest: dedup.NewDigester().Digest(nil, value, nil)})
				}
				seq++
			}
			bt, err := batch.Build(rs)
			if err != nil {
				b.Fatal(err)
			}
			a.Batches = append(a.Batches, PartitionBatch{Partition: int32(p), Batch: bt, Keys: keys})
		}
		out[i] = a
	}
	return out
}

// BenchmarkAppendCodec measures encoding an Append into a sealed Raft entry
// and decoding it back, per record, with and without idempotency keys.
func BenchmarkAppendCodec(b *testing.B) {
	for _, keyed := range []bool{false, true} {
		apps := benchAppends(b, 64, 1000, 4, 128, keyed)
		b.Run(fmt.Sprintf("encode/keyed=%v", keyed), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				sealEntry(encodeAppend(1, apps[i%len(apps)]))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/record")
		})
		data := make([][]byte, len(apps))
		for i, a := range apps {
			data[i] = sealEntry(encodeAppend(1, a))
		}
		b.Run(fmt.Sprintf("decode/keyed=%v", keyed), func(b *testing.B) {
			var scratch keyScratch
			for i := 0; b.Loop(); i++ {
				if _, err := decodeCommandWith(data[i%len(data)], &scratch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/record")
		})
	}
}

// BenchmarkApplyAppend measures the state machine applying Append entries
// of 1000 records of 128 bytes (with and without idempotency keys, the
// keyed topic's window full at its default bound) and of 1 KiB: the serial
// part of a produce, and what every replica does per entry.
func BenchmarkApplyAppend(b *testing.B) {
	for _, c := range []struct {
		size  int
		keyed bool
	}{{128, false}, {128, true}, {1024, false}} {
		size, keyed := c.size, c.keyed
		b.Run(fmt.Sprintf("size=%d/keyed=%v", size, keyed), func(b *testing.B) {
			dir := b.TempDir()
			f := New(Config{Dir: filepath.Join(dir, "topics"), Log: log.Options{Sync: log.SyncNone}, Logger: testLogger(), Fatal: func(err error) { b.Fatal(err) }})
			defer f.Close()
			d, err := encodeJSONCommand(CmdCreateTopic, 1, CreateTopic{Name: "b", Partitions: 4})
			if err != nil {
				b.Fatal(err)
			}
			index := uint64(1)
			if r := f.ApplyBatch([]Entry{{Index: index, Command: true, Data: d}})[0]; r != nil {
				if err, ok := r.(error); ok {
					b.Fatal(err)
				}
			}
			// Enough distinct keys to fill the window and keep evicting.
			apps := benchAppends(b, 256, 1000, 4, size, keyed)
			data := make([][]byte, len(apps))
			for i, a := range apps {
				data[i] = sealEntry(encodeAppend(1, a))
			}
			apply := func(i int) {
				index++
				if err, ok := f.applyOne(index, data[i%len(data)]).(error); ok {
					b.Fatal(err)
				}
			}
			for i := range len(data) {
				apply(i)
			}
			// Keys repeat every len(data) entries; by then they are evicted.
			for i := 0; b.Loop(); i++ {
				apply(i)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/record")
		})
	}
}
