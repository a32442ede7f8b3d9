package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
)

// produceN writes n records "v0".."v{n-1}" to one partition, with
// timestamps base+i seconds.
func produceN(t *testing.T, c *client.Client, topic string, part int32, n int, base time.Time) {
	t.Helper()
	produceRange(t, c, topic, part, 0, n, base)
}

// produceRange writes records "v{from}".."v{to-1}" to one partition in one
// call, record i timestamped base+i seconds.
func produceRange(t *testing.T, c *client.Client, topic string, part int32, from, to int, base time.Time) {
	t.Helper()
	var recs []client.Record
	for i := from; i < to; i++ {
		recs = append(recs, client.Record{Value: fmt.Appendf(nil, "v%d", i), Partition: &part, Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	if _, err := c.Produce(testContext(t), topic, recs); err != nil {
		t.Fatalf("Produce: %v", err)
	}
}

// produceTrimmed creates topic with one partition holding records
// "v0".."v{n-1}" (record i timestamped base+i seconds, base long ago) of
// which retention has deleted the first below: they are written in their
// own segment (segment.bytes is tiny, so each call gets one), older than
// the topic's retention.ms, and the node's cleaner runs.
func produceTrimmed(t *testing.T, c *client.Client, srv *logdtest.Server, topic string, n, below int, base time.Time) {
	t.Helper()
	if _, err := c.CreateTopic(testContext(t), topic, 1, map[string]string{"segment.bytes": "14"}); err != nil {
		t.Fatal(err)
	}
	produceRange(t, c, topic, 0, 0, below, base)
	produceRange(t, c, topic, 0, below, n, base)
	if err := srv.Clean(testContext(t)); err != nil {
		t.Fatal(err)
	}
	d, err := c.DescribeTopic(testContext(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	if p := d.Partitions[0]; p.LogStart != int64(below) || p.End != int64(n) {
		t.Fatalf("partition after retention: %+v, want [%d, %d)", p, below, n)
	}
}

func TestConsumerIteratesFollowingNextOffset(t *testing.T) {
	c, srv := newTestClient(t, client.Options{})
	mustCreate(t, c, "t", 2)
	produceN(t, c, "t", 1, 10, time.UnixMilli(1e12))

	cs, err := c.NewConsumer(client.ConsumerOptions{Topic: "t", Partition: 1, Offset: client.OffsetEarliest, MaxRecords: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	var got []int64
	for r, err := range cs.Records(ctx) {
		if err != nil {
			t.Fatalf("Records: %v", err)
		}
		if want := fmt.Sprintf("v%d", r.Offset); string(r.Value) != want {
			t.Fatalf("record %d value %q, want %q", r.Offset, r.Value, want)
		}
		got = append(got, r.Offset)
		if len(got) == 10 {
			break
		}
	}
	for i, off := range got {
		if off != int64(i) {
			t.Fatalf("offsets = %v, want 0..9", got)
		}
	}
	if cs.Position() != 10 {
		t.Fatalf("Position = %d, want 10", cs.Position())
	}
	// MaxRecords 3 over 10 records: four fetches, plus one DescribeTopic to
	// resolve OffsetEarliest.
	if f, d := srv.Calls("Fetch"), srv.Calls("DescribeTopic"); f != 4 || d != 1 {
		t.Fatalf("Fetch calls = %d, DescribeTopic calls = %d; want 4 and 1", f, d)
	}
}

func TestConsumerLatestWaitsForNewRecords(t *testing.T) {
	c, srv := newTestClient(t, client.Options{})
	mustCreate(t, c, "t", 1)
	produceN(t, c, "t", 0, 5, time.UnixMilli(1e12))

	cs, err := c.NewConsumer(client.ConsumerOptions{Topic: "t", Offset: client.OffsetLatest, MaxWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	type result struct {
		recs []client.FetchedRecord
		err  error
	}
	// Produce only once the consumer has resolved "latest" and its fetch
	// has reached the server, so the new records land after its position.
	fetching := make(chan struct{})
	srv.Intercept("Fetch", func(context.Context) error {
		close(fetching)
		return nil
	})
	done := make(chan result, 1)
	go func() {
		recs, err := cs.Poll(ctx)
		done <- result{recs, err}
	}()
	<-fetching
	produceN(t, c, "t", 0, 2, time.UnixMilli(1e12))
	res := <-done
	if res.err != nil || len(res.recs) == 0 || res.recs[0].Offset != 5 {
		t.Fatalf("Poll = %+v, %v; want records from offset 5", res.recs, res.err)
	}
}

func TestConsumerOutOfRangeAfterRetention(t *testing.T) {
	c, srv := newTestClient(t, client.Options{})
	produceTrimmed(t, c, srv, "t", 10, 6, time.UnixMilli(1e12))
	cs, err := c.NewConsumer(client.ConsumerOptions{Topic: "t", Offset: 2})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.Poll(testContext(t))
	var oor *client.OutOfRangeError
	if !errors.As(err, &oor) || oor.Offset != 2 || oor.LogStart != 6 || oor.End != 10 {
		t.Fatalf("Poll error = %v (%+v), want OutOfRangeError{2, 6, 10}", err, oor)
	}
	if cs.Position() != 2 {
		t.Fatalf("Position after error = %d, want 2", cs.Position())
	}
	cs.SetPosition(oor.LogStart)
	recs, err := cs.Poll(testContext(t))
	if err != nil || len(recs) != 4 || recs[0].Offset != 6 {
		t.Fatalf("Poll after SetPosition = %d records, %v", len(recs), err)
	}
}

func TestConsumerOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		opts client.ConsumerOptions
		ok   bool
	}{
		{name: "minimal", opts: client.ConsumerOptions{Topic: "t"}, ok: true},
		{name: "no topic", opts: client.ConsumerOptions{}},
		{name: "negative partition", opts: client.ConsumerOptions{Topic: "t", Partition: -1}},
		{name: "bad offset", opts: client.ConsumerOptions{Topic: "t", Offset: -3}},
		{name: "negative wait", opts: client.ConsumerOptions{Topic: "t", MaxWait: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.opts.Validate(); (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestOffsetForTime(t *testing.T) {
	base := time.UnixMilli(1_700_000_000_000)
	// The node's clock stands an hour after base, and retention keeps a
	// segment whose newest record is younger than 3598.5 s: the cleaner
	// deletes the segment of records 0 and 1 (base+1 s is 3599 s old) and
	// keeps record 2's.
	clk := &testClock{t: base.Add(time.Hour)}
	c, srv := newTestClientOn(t, client.Options{}, logdtest.Options{Now: clk.Now})
	if _, err := c.CreateTopic(testContext(t), "t", 1, map[string]string{"segment.bytes": "14", "retention.ms": "3598500"}); err != nil {
		t.Fatal(err)
	}
	produceRange(t, c, "t", 0, 0, 2, base)
	// One call per record from 2 on: the time index finds a batch by its
	// largest timestamp (as in Kafka), and each of these batches is one
	// record.
	for i := 2; i < 10; i++ {
		produceRange(t, c, "t", 0, i, i+1, base)
	}
	if err := srv.Clean(testContext(t)); err != nil {
		t.Fatal(err)
	}
	// Records sharing a batch are found by the batch: its base offset.
	mustCreate(t, c, "batched", 1)
	produceN(t, c, "batched", 0, 5, base)
	tests := []struct {
		name  string
		topic string
		at    time.Time
		want  int64
	}{
		{name: "before everything", topic: "t", at: base.Add(-time.Hour), want: 2},
		{name: "deleted by retention", topic: "t", at: base.Add(time.Second), want: 2},
		{name: "exact", topic: "t", at: base.Add(5 * time.Second), want: 5},
		{name: "between", topic: "t", at: base.Add(5500 * time.Millisecond), want: 6},
		{name: "after everything", topic: "t", at: base.Add(time.Hour), want: 10},
		{name: "inside a batch", topic: "batched", at: base.Add(3 * time.Second), want: 0},
		{name: "after a batch", topic: "batched", at: base.Add(5 * time.Second), want: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.OffsetForTime(testContext(t), tt.topic, 0, tt.at)
			if err != nil || got != tt.want {
				t.Fatalf("OffsetForTime = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
	if _, err := c.OffsetForTime(testContext(t), "t", 7, base); !errors.Is(err, client.ErrUnknownPartition) {
		t.Fatalf("OffsetForTime of a missing partition: %v", err)
	}
}
