package replication

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/dedup"
	"github.com/logd-dev/logd/partition"
)

// openBackend opens a single-node backend with topic "t" of parts
// partitions.
func openBackend(t *testing.T, ctx context.Context, parts int32) *Backend {
	t.Helper()
	n := openSingleNode(t, ctx, Config{DataDir: t.TempDir(), CleanerInterval: time.Hour})
	t.Cleanup(func() { n.Close() })
	b := NewBackend(n)
	if _, err := b.CreateTopic(ctx, backend.CreateTopic{Name: "t", Partitions: parts}); err != nil {
		t.Fatal(err)
	}
	return b
}

// readRecords decodes every record of a partition.
func readRecords(t *testing.T, b *Backend, p int32) []batch.Record {
	t.Helper()
	r, err := b.Read("t", p, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := batch.Records(r.Batches, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestProduceRouting: explicit partitions, murmur2 of keys and round-robin
// for keyless records, each record at the offset its result names.
func TestProduceRouting(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	b := openBackend(t, ctx, 4)
	recs := []backend.ProduceRecord{
		{Partition: 3, HasPartition: true, Value: []byte("explicit"), TimestampMs: 5},
		{Key: []byte("k1"), Value: []byte("keyed")},
		{Key: []byte("k2"), Value: []byte("keyed"), Headers: []batch.Header{{Key: "h", Value: []byte("v")}}},
		{Value: []byte("rr0")},
		{Value: []byte("rr1")},
		{Value: []byte("rr2")},
	}
	res, err := b.Produce(ctx, backend.ProduceRequest{Topic: "t", Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	want := []int32{3, partition.ForKey([]byte("k1"), 4), partition.ForKey([]byte("k2"), 4), 0, 1, 2}
	for i, r := range res.Results {
		if r.Partition != want[i] || r.Duplicate {
			t.Errorf("record %d: %+v, want partition %d", i, r, want[i])
		}
		got := readRecords(t, b, r.Partition)
		if r.Offset >= int64(len(got)) || string(got[r.Offset].Value) != string(recs[i].Value) {
			t.Errorf("record %d: not at %d-%d", i, r.Partition, r.Offset)
		}
	}
	if res.Appended != len(recs) || res.Bytes == 0 || res.Duplicates != 0 || res.CommitTime <= 0 {
		t.Errorf("stats %+v", res)
	}
	if got := readRecords(t, b, 3); got[0].Timestamp != 5 {
		t.Errorf("timestamp %d, want 5", got[0].Timestamp)
	}
	if got := readRecords(t, b, res.Results[2].Partition)[res.Results[2].Offset]; len(got.Headers) != 1 || got.Headers[0].Key != "h" {
		t.Errorf("headers %v", got.Headers)
	}
	// The round-robin counter continues across calls and restarts after
	// the topic is deleted.
	res, err = b.Produce(ctx, backend.ProduceRequest{Topic: "t", Records: []backend.ProduceRecord{{Value: []byte("rr3")}}})
	if err != nil || res.Results[0].Partition != 3 {
		t.Fatalf("%+v, %v; want partition 3", res, err)
	}
	if err := b.DeleteTopic(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTopic(ctx, backend.CreateTopic{Name: "t", Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	res, err = b.Produce(ctx, backend.ProduceRequest{Topic: "t", Records: []backend.ProduceRecord{{Value: []byte("rr0")}}})
	if err != nil || res.Results[0].Partition != 0 {
		t.Fatalf("%+v, %v; want partition 0", res, err)
	}
}

// TestProduceIdempotencyKeys: repeats within a call and across calls are
// answered with the original offset, a changed payload is refused, and
// nothing is appended twice.
func TestProduceIdempotencyKeys(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	b := openBackend(t, ctx, 1)
	produce := func(recs ...backend.ProduceRecord) (backend.ProduceResult, error) {
		return b.Produce(ctx, backend.ProduceRequest{Topic: "t", Records: recs})
	}
	a := backend.ProduceRecord{Value: []byte("a"), IdempotencyKey: "ka"}
	res, err := produce(a, backend.ProduceRecord{Value: []byte("x")}, a)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results; r[0] != (backend.RecordResult{Offset: 0}) || r[1] != (backend.RecordResult{Offset: 1}) || r[2] != (backend.RecordResult{Offset: 0, Duplicate: true}) {
		t.Fatalf("results %+v", r)
	}
	// A retry of the call: the keyed record is a duplicate from the window
	// (after the state machine refused the first round), the other is new.
	res, err = produce(a, backend.ProduceRecord{Value: []byte("y"), IdempotencyKey: "kb"})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results; r[0] != (backend.RecordResult{Offset: 0, Duplicate: true}) || r[1] != (backend.RecordResult{Offset: 2}) || res.Duplicates != 1 || res.Appended != 1 {
		t.Fatalf("results %+v", res)
	}
	for _, tc := range []struct {
		name string
		recs []backend.ProduceRecord
	}{
		{name: "in the window", recs: []backend.ProduceRecord{{Value: []byte("other"), IdempotencyKey: "ka"}}},
		{name: "in the call", recs: []backend.ProduceRecord{{Value: []byte("1"), IdempotencyKey: "kc"}, {Value: []byte("2"), IdempotencyKey: "kc"}}},
		{name: "headers differ", recs: []backend.ProduceRecord{{Value: []byte("a"), IdempotencyKey: "ka", Headers: []batch.Header{{Key: "h"}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := produce(tc.recs...); !errors.Is(err, dedup.ErrIdempotencyConflict) {
				t.Fatalf("error %v, want ErrIdempotencyConflict", err)
			}
		})
	}
	if got := readRecords(t, b, 0); len(got) != 3 {
		t.Fatalf("%d records stored, want 3", len(got))
	}
}

// TestProduceRefusesWhole: a bad record refuses the call and writes
// nothing; each refusal has its sentinel.
func TestProduceRefusesWhole(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	b := openBackend(t, ctx, 2)
	ok := backend.ProduceRecord{Value: []byte("fine")}
	big := make([]byte, 2<<20)
	for _, tc := range []struct {
		name  string
		topic string
		bad   backend.ProduceRecord
		want  error
	}{
		{name: "partition", topic: "t", bad: backend.ProduceRecord{Partition: 2, HasPartition: true}, want: backend.ErrUnknownPartition},
		{name: "negative partition", topic: "t", bad: backend.ProduceRecord{Partition: -1, HasPartition: true}, want: backend.ErrUnknownPartition},
		{name: "timestamp", topic: "t", bad: backend.ProduceRecord{TimestampMs: -1}, want: backend.ErrInvalidArgument},
		{name: "too large", topic: "t", bad: backend.ProduceRecord{Value: big}, want: backend.ErrRecordTooLarge},
		{name: "key too long", topic: "t", bad: backend.ProduceRecord{IdempotencyKey: string(make([]byte, dedup.MaxIdempotencyKeyBytes+1))}, want: backend.ErrInvalidArgument},
		{name: "unknown topic", topic: "u", bad: ok, want: backend.ErrUnknownTopic},
		{name: "topic name", topic: "a/b", bad: ok, want: partition.ErrInvalidTopicName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.Produce(ctx, backend.ProduceRequest{Topic: tc.topic, Records: []backend.ProduceRecord{ok, tc.bad}})
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
		})
	}
	for p := range int32(2) {
		if o, err := b.Offsets("t", p); err != nil || o.End != 0 {
			t.Fatalf("partition %d: %+v, %v; want nothing written", p, o, err)
		}
	}
}

// TestReadLongPoll: a read at the end returns no bytes and a channel the
// next append closes; the bytes read are the stored batch, unchanged.
func TestReadLongPoll(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	b := openBackend(t, ctx, 1)
	r, err := b.Read("t", 0, 0, 1<<20)
	if err != nil || len(r.Batches) != 0 || r.EndOffset != 0 {
		t.Fatalf("%+v, %v", r, err)
	}
	select {
	case <-r.Changed:
		t.Fatal("changed before an append")
	default:
	}
	stored, err := batch.Build([]batch.Record{{Timestamp: 1, Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, backend.Append{Topic: "t", Batches: []backend.PartitionBatch{{Partition: 0, Batch: stored}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Changed:
	case <-ctx.Done():
		t.Fatal("the append did not close the channel")
	}
	// The log sets baseOffset and the leader epoch (bytes 0-7 and 12-15,
	// outside the CRC); everything else is served as built.
	r, err = b.Read("t", 0, 0, 1)
	if err != nil || len(r.Batches) != len(stored) || string(r.Batches[16:]) != string(stored[16:]) || r.LogStartOffset != 0 || r.EndOffset != 1 {
		t.Fatalf("%+v, %v; want the stored batch", r, err)
	}
	var oor *backend.OutOfRangeError
	if _, err := b.Read("t", 0, 2, 1); !errors.As(err, &oor) || oor.End != 1 {
		t.Fatalf("error %v, want OutOfRangeError with end 1", err)
	}
}
