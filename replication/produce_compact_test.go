package replication

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
)

// TestCompactedTopicNeedsKeys: a topic whose cleanup.policy includes
// compact refuses a record without a key, whichever door it comes
// through (Produce, which the Connect API calls, and Append, which the
// Kafka listener calls), and writes nothing of the call; a tombstone (a
// key with a null value) is taken, and so is a null key on a topic that
// is not compacted.
func TestCompactedTopicNeedsKeys(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	b := openBackend(t, ctx, 2) // "t": not compacted
	for _, name := range []string{"compact", "both"} {
		policy := map[string]string{"compact": "compact", "both": "compact,delete"}[name]
		if _, err := b.CreateTopic(ctx, backend.CreateTopic{Name: name, Partitions: 2, Config: map[string]string{"cleanup.policy": policy}}); err != nil {
			t.Fatal(err)
		}
	}
	keyed := backend.ProduceRecord{Key: []byte("k"), Value: []byte("v")}
	tombstone := backend.ProduceRecord{Key: []byte("gone")}
	keyless := backend.ProduceRecord{Value: []byte("no key")}
	emptyKey := backend.ProduceRecord{Key: []byte{}, Value: []byte("an empty key is a key")}
	build := func(recs ...batch.Record) []byte {
		t.Helper()
		bb, err := batch.Build(recs)
		if err != nil {
			t.Fatal(err)
		}
		return bb
	}
	for _, tc := range []struct {
		name    string
		topic   string
		records []backend.ProduceRecord
		batch   []byte // through fsm.Append instead
		refused bool
	}{
		{name: "produce: a keyless record among keyed ones", topic: "compact", records: []backend.ProduceRecord{keyed, keyless, keyed}, refused: true},
		{name: "produce: keyless, compact and delete", topic: "both", records: []backend.ProduceRecord{keyless}, refused: true},
		{name: "produce: keyless, explicit partition", topic: "compact", records: []backend.ProduceRecord{{Partition: 1, HasPartition: true, Value: []byte("x")}}, refused: true},
		{name: "append: a keyless record in the batch", topic: "compact",
			batch: build(batch.Record{Key: []byte("k"), Value: []byte("v")}, batch.Record{Value: []byte("no key")}), refused: true},
		{name: "append: a gzip batch with a keyless record", topic: "both",
			batch: gzipped(t, build(batch.Record{Value: []byte("no key")})), refused: true},
		{name: "produce: keys, a tombstone and an empty key", topic: "compact", records: []backend.ProduceRecord{keyed, tombstone, emptyKey}},
		{name: "append: keys and a tombstone", topic: "compact", batch: build(batch.Record{Key: []byte("k"), Value: []byte("v")}, batch.Record{Key: []byte("k")})},
		{name: "produce: keyless, not compacted", topic: "t", records: []backend.ProduceRecord{keyless}},
		{name: "append: keyless, not compacted", topic: "t", batch: build(batch.Record{Value: []byte("no key")})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A batch goes through Append as the Kafka listener sends it
			// (its CRC verified) and as another caller would (not).
			for _, verified := range []bool{false, true} {
				if tc.batch == nil && verified {
					break
				}
				before := endOffsets(t, b, tc.topic)
				var err error
				if tc.batch != nil {
					_, err = b.Append(ctx, backend.Append{Topic: tc.topic, Verified: verified, Batches: []backend.PartitionBatch{{Partition: 0, Batch: tc.batch}}})
				} else {
					_, err = b.Produce(ctx, backend.ProduceRequest{Topic: tc.topic, Records: tc.records})
				}
				switch {
				case tc.refused && !errors.Is(err, backend.ErrKeyRequired):
					t.Fatalf("verified %v: error %v; want backend.ErrKeyRequired", verified, err)
				case !tc.refused && err != nil:
					t.Fatalf("verified %v: refused: %v", verified, err)
				}
				if after := endOffsets(t, b, tc.topic); tc.refused && after != before {
					t.Fatalf("verified %v: end offsets %v after the refusal, %v before: something was written", verified, after, before)
				}
			}
		})
	}
}

// endOffsets are the ends of a two-partition topic's partitions.
func endOffsets(t *testing.T, b *Backend, topic string) [2]int64 {
	t.Helper()
	var out [2]int64
	for p := range int32(2) {
		o, err := b.Offsets(topic, p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = o.End
	}
	return out
}

// gzipped returns an uncompressed batch's records as a gzip batch.
func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	c, err := batch.Compress(b, batch.CompressionGzip)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
