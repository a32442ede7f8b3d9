package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
)

// startExampleServer runs a real logd node in process (package logdtest)
// for the examples and returns its address and a function that stops it.
func startExampleServer() (string, func()) {
	srv, err := logdtest.New(logdtest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	return srv.Addr(), func() {
		if err := srv.Close(); err != nil {
			log.Fatal(err)
		}
	}
}

// ExampleProducer sends records asynchronously: they are batched per
// partition (here: up to 100 records or 10 ms), and each Send returns a
// channel with the record's result.
func ExampleProducer() {
	addr, stop := startExampleServer() // a real node: "127.0.0.1:7070"
	defer stop()
	ctx := context.Background()
	c, err := client.New(addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "orders", 3, nil); err != nil {
		log.Fatal(err)
	}

	p, err := c.NewProducer(ctx, client.ProducerOptions{Topic: "orders", BatchRecords: 100, Linger: 10 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	var results []<-chan client.ProduceResult
	for _, event := range []string{"created", "paid", "shipped"} {
		ch, err := p.Send(ctx, client.Record{Key: []byte("order-1"), Value: []byte(event)})
		if err != nil {
			log.Fatal(err) // the producer is closed, or ctx ended while the buffer was full
		}
		results = append(results, ch)
	}
	if err := p.Close(); err != nil { // sends what is pending and waits for it
		log.Fatal(err)
	}
	for _, ch := range results {
		r := <-ch
		if r.Err != nil {
			log.Fatal(r.Err)
		}
		fmt.Printf("%s -> partition %d offset %d\n", r.Record.Value, r.Partition, r.Offset)
	}
	// Output:
	// created -> partition 1 offset 0
	// paid -> partition 1 offset 1
	// shipped -> partition 1 offset 2
}

// ExampleConsumer reads one partition from the beginning.
func ExampleConsumer() {
	addr, stop := startExampleServer()
	defer stop()
	ctx := context.Background()
	c, err := client.New(addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "orders", 1, nil); err != nil {
		log.Fatal(err)
	}
	if _, err := c.Produce(ctx, "orders", []client.Record{{Value: []byte("created")}, {Value: []byte("paid")}}); err != nil {
		log.Fatal(err)
	}

	cs, err := c.NewConsumer(client.ConsumerOptions{Topic: "orders", Partition: 0, Offset: client.OffsetEarliest, MaxWait: 10 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	recs, err := cs.Poll(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range recs {
		fmt.Printf("%d: %s\n", r.Offset, r.Value)
	}
	// Output:
	// 0: created
	// 1: paid
}

// ExampleRetrier runs an operation of your own under the client's retry
// policy and budget: retryable errors are retried with backoff, others
// return at once.
func ExampleRetrier() {
	c, err := client.New("127.0.0.1:7070", client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	r := client.Retrier{
		Name:      "charge",
		Policy:    client.RetryPolicy{MaxAttempts: 5, InitialBackoff: time.Millisecond, Deadline: time.Second, Budget: c.RetryBudget()},
		Retryable: func(err error) bool { return errors.Is(err, client.ErrUnavailable) },
	}
	attempts := 0
	err = r.Do(context.Background(), func(ctx context.Context) error {
		attempts++
		if attempts < 3 {
			return client.ErrUnavailable // e.g. the payment service is restarting
		}
		return nil
	})
	fmt.Println(attempts, err)
	// Output: 3 <nil>
}

// ExampleGroupConsumer reads a topic as a member of a consumer group: the
// group's members share its partitions, and the group's committed offsets
// say where each partition resumes.
func ExampleGroupConsumer() {
	addr, stop := startExampleServer() // a real node: "127.0.0.1:7070"
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "orders", 1, nil); err != nil {
		log.Fatal(err)
	}
	var recs []client.Record
	for _, event := range []string{"created", "paid", "shipped"} {
		recs = append(recs, client.Record{Key: []byte("order-1"), Value: []byte(event)})
	}
	if _, err := c.Produce(ctx, "orders", recs); err != nil {
		log.Fatal(err)
	}

	gc, err := c.NewGroupConsumer(client.GroupConsumerOptions{Group: "billing", Topics: []string{"orders"}})
	if err != nil {
		log.Fatal(err)
	}
	for read := 0; read < 3; {
		got, err := gc.Poll(ctx) // joins, heartbeats and auto-commits as it goes
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range got {
			fmt.Printf("%s/%d@%d: %s\n", r.Topic, r.Partition, r.Offset, r.Value)
		}
		read += len(got)
	}
	if err := gc.Close(ctx); err != nil { // commits what was read and leaves
		log.Fatal(err)
	}
	d, err := c.DescribeGroup(ctx, "billing")
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range d.Partitions {
		fmt.Printf("billing resumes %s/%d at %d\n", p.Topic, p.Partition, p.Committed)
	}
	// Output:
	// orders/0@0: created
	// orders/0@1: paid
	// orders/0@2: shipped
	// billing resumes orders/0 at 3
}

// ExampleRetryPolicy_failOverloaded fails a produce at the server's first
// refusal for overload, for a caller that applies backpressure itself:
// the error says how long the server asks it to wait. (MaxOverloadWait
// would instead wait out the refusals for as long as it says.)
func ExampleRetryPolicy_failOverloaded() {
	addr, stop := startExampleServer()
	defer stop()
	ctx := context.Background()
	c, err := client.New(addr, client.Options{Retry: client.RetryPolicy{FailOverloaded: true}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	// A queue group whose backlog may hold one record, and holds one.
	if _, err := c.CreateTopic(ctx, "jobs", 1, map[string]string{"queue.max.backlog.records": "1"}); err != nil {
		log.Fatal(err)
	}
	if _, err := c.CreateQueueGroup(ctx, "jobs", "workers", client.QueueGroupConfig{}, false); err != nil {
		log.Fatal(err)
	}
	if _, err := c.Produce(ctx, "jobs", []client.Record{{Value: []byte("job-1")}}); err != nil {
		log.Fatal(err)
	}

	_, err = c.Produce(ctx, "jobs", []client.Record{{Value: []byte("job-2")}})
	var oe *client.OverloadedError
	if errors.As(err, &oe) {
		fmt.Println("not written; the server asks to wait", oe.RetryAfter)
	}
	// Output: not written; the server asks to wait 1s
}
