package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/logd-dev/logd/client"
)

func Example() {
	ctx := context.Background()
	c, err := client.New("127.0.0.1:7070", client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	if _, err := c.CreateTopic(ctx, "orders", 3, nil); err != nil && !errors.Is(err, client.ErrTopicExists) {
		log.Fatal(err)
	}
	res, err := c.Produce(ctx, "orders", []client.Record{
		{Key: []byte("customer-42"), Value: []byte(`{"total": 12}`)},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("written to partition %d at offset %d\n", res[0].Partition, res[0].Offset)
}

func ExampleConsumer_Records() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New("127.0.0.1:7070", client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	cs, err := c.NewConsumer(client.ConsumerOptions{Topic: "orders", Partition: 0, Offset: client.OffsetEarliest})
	if err != nil {
		log.Fatal(err)
	}
	for r, err := range cs.Records(ctx) {
		if err != nil {
			log.Print(err) // the context ended, or the server failed
			break
		}
		fmt.Printf("%d: %s\n", r.Offset, r.Value)
	}
}

func ExampleOutOfRangeError() {
	ctx := context.Background()
	c, err := client.New("127.0.0.1:7070", client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	_, err = c.Fetch(ctx, client.FetchRequest{Topic: "orders", Partition: 0, Offset: 0})
	var oor *client.OutOfRangeError
	if errors.As(err, &oor) {
		// Retention removed the start of the log; continue from its start.
		fmt.Println("resume at", oor.LogStart)
	}
}

func ExampleIsRetryable() {
	ctx := context.Background()
	c, err := client.New("127.0.0.1:7070", client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	_, err = c.Produce(ctx, "orders", []client.Record{{Value: []byte("x")}})
	if err != nil && client.IsRetryable(err) {
		// The call may succeed later, but unless errors.Is(err,
		// client.ErrNotLeader) or ErrOverloaded, it may also have written the
		// records already.
		log.Print("try again later: ", err)
	}
}
