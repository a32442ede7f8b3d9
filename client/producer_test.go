package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
	"github.com/logd-dev/logd/partition"
)

func newProducer(t *testing.T, c *client.Client, opts client.ProducerOptions) *client.Producer {
	t.Helper()
	p, err := c.NewProducer(testContext(t), opts)
	if err != nil {
		t.Fatalf("NewProducer: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func send(t *testing.T, p *client.Producer, r client.Record) <-chan client.ProduceResult {
	t.Helper()
	ch, err := p.Send(testContext(t), r)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	return ch
}

func result(t *testing.T, ch <-chan client.ProduceResult) client.ProduceResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-testContext(t).Done():
		t.Fatal("no result")
		return client.ProduceResult{}
	}
}

func part(p int32) *int32 { return &p }

// holdProduce makes the node's next n Produce calls wait until release
// is called (or the test ends).
func holdProduce(t *testing.T, srv *logdtest.Server, n int) (release func()) {
	t.Helper()
	ch := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(release)
	for range n {
		srv.Intercept("Produce", func(ctx context.Context) error {
			select {
			case <-ch:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}
	return release
}

// waitCalls waits until the node has seen n Produce calls.
func waitCalls(t *testing.T, srv *logdtest.Server, n int) {
	t.Helper()
	ctx := testContext(t)
	for srv.Calls("Produce") < n {
		select {
		case <-ctx.Done():
			t.Fatalf("%d Produce calls, never %d", srv.Calls("Produce"), n)
		case <-time.After(time.Millisecond):
		}
	}
}

// TestProducerLinger: a partition with nothing in flight sends at once;
// records that arrive while a batch is in flight wait for the linger,
// then go together beside it.
func TestProducerLinger(t *testing.T) {
	c, srv := newTestClient(t, client.Options{})
	mustCreate(t, c, "t", 1)
	const linger = 100 * time.Millisecond
	p := newProducer(t, c, client.ProducerOptions{Topic: "t", Linger: linger, BatchRecords: 100})
	// The partition's first batch goes alone; once it is written, the
	// partition knows the producer and batches may go beside others.
	if r := result(t, send(t, p, client.Record{Value: []byte("v0")})); r.Err != nil || r.Offset != 0 {
		t.Fatalf("result 0 = %+v", r)
	}
	release := holdProduce(t, srv, 1)
	start := time.Now()
	chs := []<-chan client.ProduceResult{send(t, p, client.Record{Value: []byte("v1")})}
	waitCalls(t, srv, 2)
	if el := time.Since(start); el >= linger {
		t.Errorf("a lone record went after %v, not at once", el)
	}
	start = time.Now()
	for i := 2; i < 5; i++ {
		chs = append(chs, send(t, p, client.Record{Value: fmt.Appendf(nil, "v%d", i)}))
	}
	waitCalls(t, srv, 3) // beside the held one
	if el := time.Since(start); el < linger {
		t.Errorf("records beside a batch in flight went after %v, before the linger %v", el, linger)
	}
	release()
	for i, ch := range chs {
		if r := result(t, ch); r.Err != nil || r.Offset != int64(i+1) || r.Partition != 0 {
			t.Fatalf("result %d = %+v", i+1, r)
		}
	}
	if n := srv.Calls("Produce"); n != 3 {
		t.Errorf("Produce calls = %d, want 3", n)
	}
}

// TestProducerBatchSize: a full batch is sent without waiting for linger.
func TestProducerBatchSize(t *testing.T) {
	c, srv := newTestClient(t, client.Options{})
	mustCreate(t, c, "t", 2)
	p := newProducer(t, c, client.ProducerOptions{Topic: "t", Linger: time.Hour, BatchRecords: 2})
	var chs []<-chan client.ProduceResult
	for i := range 4 {
		chs = append(chs, send(t, p, client.Record{Value: fmt.Appendf(nil, "v%d", i), Partition: part(1)}))
	}
	for i, ch := range chs {
		if r := result(t, ch); r.Err != nil || r.Partition != 1 || r.Offset != int64(i) {
			t.Fatalf("result %d = %+v", i, r)
		}
	}
	if n := srv.Calls("Produce"); n != 2 {
		t.Errorf("Produce calls = %d, want 2 batches of 2", n)
	}
	// BatchBytes: two 5-byte values fill a 10-byte batch.
	pb := newProducer(t, c, client.ProducerOptions{Topic: "t", Linger: time.Hour, BatchBytes: 10})
	a := send(t, pb, client.Record{Value: []byte("aaaaa"), Partition: part(0)})
	b := send(t, pb, client.Record{Value: []byte("bbbbb"), Partition: part(0)})
	if ra, rb := result(t, a), result(t, b); ra.Err != nil || rb.Err != nil || rb.Offset != ra.Offset+1 {
		t.Fatalf("byte-bounded batch results %+v %+v", ra, rb)
	}
}

// TestProducerPartitioning: keys go where the server's murmur2 puts them,
// explicit partitions are kept, keyless records stick to one partition per
// batch.
func TestProducerPartitioning(t *testing.T) {
	c, _ := newTestClient(t, client.Options{})
	mustCreate(t, c, "t", 4)
	p := newProducer(t, c, client.ProducerOptions{Topic: "t", Linger: time.Millisecond})
	for _, k := range []string{"a", "b", "customer-42", "zz"} {
		r := result(t, send(t, p, client.Record{Key: []byte(k), Value: []byte("v")}))
		if want := partition.ForKey([]byte(k), 4); r.Err != nil || r.Partition != want {
			t.Fatalf("key %q: %+v, want partition %d", k, r, want)
		}
	}
	a := send(t, p, client.Record{Value: []byte("x")})
	b := send(t, p, client.Record{Value: []byte("y")})
	if ra, rb := result(t, a), result(t, b); ra.Partition != rb.Partition {
		t.Errorf("keyless records of one batch went to partitions %d and %d", ra.Partition, rb.Partition)
	}
	if _, err := p.Send(testContext(t), client.Record{Partition: part(9)}); !errors.Is(err, client.ErrUnknownPartition) {
		t.Errorf("Send to partition 9 of 4 = %v", err)
	}
}

// TestProducerBackPressure: the buffer never grows past BufferRecords; a
// full buffer fails or blocks by option, and a flush makes room.
func TestProducerBackPressure(t *testing.T) {
	c, srv := newTestClient(t, client.Options{})
	mustCreate(t, c, "t", 1)
	ctx := testContext(t)

	// The node holds the first batch, so the records stay buffered.
	release := holdProduce(t, srv, 1)
	pf := newProducer(t, c, client.ProducerOptions{Topic: "t", Linger: time.Hour, BufferRecords: 2, FailWhenFull: true})
	send(t, pf, client.Record{Value: []byte("1")})
	send(t, pf, client.Record{Value: []byte("2")})
	if _, err := pf.Send(ctx, client.Record{Value: []byte("3")}); !errors.Is(err, client.ErrProducerFull) {
		t.Fatalf("Send to a full buffer = %v, want ErrProducerFull", err)
	}
	release()
	if err := pf.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	send(t, pf, client.Record{Value: []byte("3")}) // room again
	if err := pf.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	release = holdProduce(t, srv, 1)
	pb := newProducer(t, c, client.ProducerOptions{Topic: "t", Linger: time.Hour, BufferRecords: 1})
	send(t, pb, client.Record{Value: []byte("1")})
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := pb.Send(short, client.Record{Value: []byte("2")}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocked Send = %v, want its context's deadline", err)
	}
	// A Send blocked on a full buffer gets in once the answer frees a
	// slot.
	got := make(chan error, 1)
	go func() {
		_, err := pb.Send(ctx, client.Record{Value: []byte("2")})
		got <- err
	}()
	release()
	if err := pb.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Send after flush = %v", err)
	}
	pb.Close()
	if _, err := pb.Send(ctx, client.Record{Value: []byte("3")}); !errors.Is(err, client.ErrProducerClosed) {
		t.Fatalf("Send after Close = %v", err)
	}
}

// TestProducerOrderAcrossRetries: a batch that fails with a retryable
// error is retried whole before the partition's next batch goes, so
// offsets follow the order of Send.
func TestProducerOrderAcrossRetries(t *testing.T) {
	c, srv := newTestClient(t, client.Options{})
	mustCreate(t, c, "t", 1)
	srv.FailNext("Produce", notLeader(), overloaded(time.Millisecond), notLeader())
	p := newProducer(t, c, client.ProducerOptions{Topic: "t", Linger: time.Hour, BatchRecords: 2})
	var chs []<-chan client.ProduceResult
	for i := range 10 {
		chs = append(chs, send(t, p, client.Record{Value: fmt.Appendf(nil, "%d", i)}))
	}
	if err := p.Flush(testContext(t)); err != nil {
		t.Fatal(err)
	}
	for i, ch := range chs {
		r := result(t, ch)
		if r.Err != nil || r.Offset != int64(i) || string(r.Record.Value) != fmt.Sprint(i) {
			t.Fatalf("record %d: %+v, want offset %d", i, r, i)
		}
	}
	recs, err := c.Fetch(testContext(t), client.FetchRequest{Topic: "t", Partition: 0, Offset: 0})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs.Records {
		if string(r.Value) != fmt.Sprint(i) {
			t.Fatalf("offset %d holds %q", i, r.Value)
		}
	}
	// A partition with nothing in flight sends at once, so how the ten
	// records fall into batches of one or two depends on when the
	// sender runs (a loaded machine makes more, smaller ones): 5 to 10
	// batches, each answered once, plus the 3 failed calls retried. A
	// batch appended twice would have moved the offsets above.
	if n := srv.Calls("Produce"); n < 5+3 || n > 10+3 {
		t.Errorf("Produce calls = %d, want 5 to 10 batches + 3 retries", n)
	}
}

// TestProducerCloseFlushes: Close sends what is queued and joins its
// goroutines (goleak checks the latter).
func TestProducerCloseFlushes(t *testing.T) {
	c, _ := newTestClient(t, client.Options{})
	mustCreate(t, c, "t", 3)
	p := newProducer(t, c, client.ProducerOptions{Topic: "t", Linger: time.Hour})
	var chs []<-chan client.ProduceResult
	for i := range 30 {
		chs = append(chs, send(t, p, client.Record{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}))
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ch := range chs {
		select {
		case r := <-ch:
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		default:
			t.Fatal("Close returned before a result")
		}
	}
}

// TestProducerNoLinger: by default a record is sent at once when its
// partition has no batch in flight, and the records sent while one is in
// flight go together in the next batch, in order.
func TestProducerNoLinger(t *testing.T) {
	c, srv := newTestClient(t, client.Options{})
	mustCreate(t, c, "t", 1)
	release := make(chan struct{})
	srv.Intercept("Produce", func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	p := newProducer(t, c, client.ProducerOptions{Topic: "t"})
	chs := []<-chan client.ProduceResult{send(t, p, client.Record{Value: []byte("v0")})}
	ctx := testContext(t)
	for srv.Calls("Produce") == 0 {
		// The first record went without waiting for others.
		select {
		case <-ctx.Done():
			t.Fatal("the first record was never sent")
		case <-time.After(time.Millisecond):
		}
	}
	for i := 1; i < 10; i++ {
		chs = append(chs, send(t, p, client.Record{Value: fmt.Appendf(nil, "v%d", i)}))
	}
	close(release)
	for i, ch := range chs {
		if r := result(t, ch); r.Err != nil || r.Offset != int64(i) {
			t.Fatalf("result %d = %+v", i, r)
		}
	}
	if n := srv.Calls("Produce"); n != 2 {
		t.Errorf("Produce calls = %d, want 2: the first record alone, the nine sent while it was in flight together", n)
	}
}

// TestProducerStickySpreads: keyless records stay on one partition for a
// batch's worth of records, then move to the next, in turn.
func TestProducerStickySpreads(t *testing.T) {
	c, _ := newTestClient(t, client.Options{})
	mustCreate(t, c, "t", 4)
	p := newProducer(t, c, client.ProducerOptions{Topic: "t", BatchRecords: 2})
	var chs []<-chan client.ProduceResult
	for i := range 10 {
		chs = append(chs, send(t, p, client.Record{Value: fmt.Appendf(nil, "v%d", i)}))
	}
	var got []int32
	for _, ch := range chs {
		r := result(t, ch)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		got = append(got, r.Partition)
	}
	if fmt.Sprint(got) != "[0 0 1 1 2 2 3 3 0 0]" {
		t.Errorf("partitions %v, want two records each, in turn", got)
	}
}
