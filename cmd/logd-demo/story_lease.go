package main

import (
	"context"
	"errors"
	"time"

	"github.com/logd-dev/logd/client"
)

// storyStaleAck: a worker holds a job past its lease; logd gives the job to
// another worker, and the first worker's late ack is refused as stale, so
// it cannot finish a delivery that is no longer its own.
func storyStaleAck(ctx context.Context, d *demo) error {
	if _, err := d.c.CreateTopic(ctx, "reports", 1, nil); err != nil {
		return err
	}
	if _, err := d.c.CreateQueueGroup(ctx, "reports", "renderers", client.QueueGroupConfig{Lease: demoLease}, false); err != nil {
		return err
	}
	if _, err := d.c.Produce(ctx, "reports", []client.Record{{Value: []byte("render monthly report")}}); err != nil {
		return err
	}
	first, err := claimOne(ctx, d.c, "reports", "renderers", 5*time.Second)
	if err != nil {
		return err
	}
	d.say("worker 1 claimed the job (delivery %d, lease until %s) and stalls", first.Delivery, first.LeaseDeadline.Format("15:04:05.000"))
	time.Sleep(time.Until(first.LeaseDeadline) + 100*time.Millisecond) // let the lease run out: that is the story
	second, err := claimOne(ctx, d.c, "reports", "renderers", 5*time.Second)
	if err != nil {
		return err
	}
	d.check(second.Delivery == 2 && second.Offset == first.Offset, "after the lease expired, worker 2 got the same job as delivery %d", second.Delivery)
	_, err = d.c.Ack(ctx, "reports", "renderers", first.Token)
	d.check(errors.Is(err, client.ErrStaleToken), "worker 1's late ack is refused: %v", err)
	_, err = d.c.Ack(ctx, "reports", "renderers", second.Token)
	d.check(err == nil, "worker 2's ack is accepted (err %v)", err)
	desc, err := d.c.DescribeQueueGroup(ctx, "reports", "renderers")
	if err != nil {
		return err
	}
	p := desc.Partitions[0]
	d.check(p.Acked == 1 && p.InFlight == 0 && p.DoneOffset == 1, "the job is finished once: acked %d, in flight %d, done offset %d", p.Acked, p.InFlight, p.DoneOffset)
	return nil
}
