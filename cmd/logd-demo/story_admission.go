package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/logd-dev/logd/client"
)

// storyAdmission: a queue topic bounds its backlog; a burst past the bound
// is refused before anything is written, with a hint of when to retry, and
// is accepted once workers have drained the backlog.
func storyAdmission(ctx context.Context, d *demo) error {
	const topic, group, limit = "thumbnails", "resizers", 5
	_, err := d.c.CreateTopic(ctx, topic, 1, map[string]string{"queue.max.backlog.records": fmt.Sprint(limit)})
	if errors.Is(err, client.ErrInvalidArgument) && strings.Contains(err.Error(), "queue.max.backlog.records") {
		fmt.Fprintln(d.out, "   SKIPPED: admission control not built yet (the server does not know queue.max.backlog.records)")
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := d.c.CreateQueueGroup(ctx, topic, group, client.QueueGroupConfig{Lease: 5 * time.Second}, false); err != nil {
		return err
	}
	d.say("topic %s: backlog bound %d records for each queue group", topic, limit)

	// A client that does not retry, to see each refusal.
	once, err := client.New(d.srv.addr, client.Options{Timeout: 5 * time.Second, Retry: client.RetryPolicy{MaxAttempts: 1}})
	if err != nil {
		return err
	}
	defer once.Close()
	accepted, refused := 0, 0
	var hint time.Duration
	for i := range 2 * limit {
		_, err := once.Produce(ctx, topic, []client.Record{{Value: fmt.Appendf(nil, "image-%d", i)}})
		var oe *client.OverloadedError
		switch {
		case err == nil:
			accepted++
		case errors.As(err, &oe):
			refused++
			hint = oe.RetryAfter
		default:
			return err
		}
	}
	d.check(accepted == limit && refused == limit, "a burst of %d: %d accepted, %d refused as overloaded", 2*limit, accepted, refused)
	d.check(hint > 0, "the refusal says when to retry: retry after %v", hint)

	res, err := d.c.Claim(ctx, client.ClaimRequest{Topic: topic, Group: group, MaxRecords: limit, MaxWait: time.Second})
	if err != nil {
		return err
	}
	tokens := make([]string, len(res.Jobs))
	for i, j := range res.Jobs {
		tokens[i] = j.Token
	}
	if _, err := d.c.Ack(ctx, topic, group, tokens...); err != nil {
		return err
	}
	d.say("a worker drained the backlog: %d jobs acked", len(tokens))
	_, err = once.Produce(ctx, topic, []client.Record{{Value: []byte("image-late")}})
	d.check(err == nil, "after draining, the produce is accepted (err %v)", err)
	return nil
}
