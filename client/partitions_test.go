package client_test

import (
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/client"
)

// TestCreatePartitions: a validation changes nothing, a growth adds empty
// partitions, a shrink is refused, and a group consumer subscribed before
// the growth reads what is produced to a new partition after it.
func TestCreatePartitions(t *testing.T) {
	c, srv := newTestClient(t, client.Options{})
	mustCreate(t, c, "t", 1)
	ctx := testContext(t)
	gc := newGroupConsumer(t, c, client.GroupConsumerOptions{Group: "g", Topics: []string{"t"}, HeartbeatInterval: 20 * time.Millisecond})
	produceValues(t, c, "t", 0, "before")
	if got := valuesOf(pollValues(t, gc, 1)); len(got) != 1 || got[0] != "before" {
		t.Fatalf("before the growth: %v", got)
	}

	g, err := c.CreatePartitions(ctx, "t", 3, true)
	if err != nil || g.Previous != 1 || g.Topic.Partitions != 1 || !g.ValidateOnly {
		t.Fatalf("validate only: %+v, %v", g, err)
	}
	g, err = c.CreatePartitions(ctx, "t", 3, false)
	if err != nil || g.Previous != 1 || g.Topic.Partitions != 3 {
		t.Fatalf("grow to 3: %+v, %v", g, err)
	}
	calls := srv.Calls("CreatePartitions")
	if _, err := c.CreatePartitions(ctx, "t", 2, false); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("shrink: %v, want ErrInvalidArgument", err)
	}
	if n := srv.Calls("CreatePartitions") - calls; n != 1 {
		t.Fatalf("shrink: %d calls, want 1 (not retried)", n)
	}
	if _, err := c.CreatePartitions(ctx, "nope", 2, false); !errors.Is(err, client.ErrUnknownTopic) {
		t.Fatalf("unknown topic: %v", err)
	}
	// An unavailable server is retried: growing to a count is idempotent.
	srv.FailNext("CreatePartitions", connect.NewError(connect.CodeUnavailable, errors.New("down")))
	if g, err := c.CreatePartitions(ctx, "t", 3, false); err != nil || g.Topic.Partitions != 3 {
		t.Fatalf("retried growth to the same count: %+v, %v", g, err)
	}

	produceValues(t, c, "t", 2, "after")
	recs := pollValues(t, gc, 1)
	if recs[0].Partition != 2 || recs[0].Offset != 0 || string(recs[0].Value) != "after" {
		t.Fatalf("after the growth: %+v", recs[0])
	}
	if a := gc.Assignment(); len(a) != 3 {
		t.Fatalf("assignment after the growth: %v", a)
	}
}
