package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/logd-dev/logd/client"
)

// storyPoison: a job that can never succeed is dead-lettered with its
// reason instead of blocking the queue; the jobs behind it complete. Once
// the handler is fixed, the dead letter is sent back to the topic
// (redriven) and completes too.
func storyPoison(ctx context.Context, d *demo) error {
	const topic, group = "emails", "senders"
	dlq := topic + "." + group + ".dlq"
	if _, err := d.c.CreateTopic(ctx, topic, 1, nil); err != nil {
		return err
	}
	if _, err := d.c.CreateQueueGroup(ctx, topic, group, client.QueueGroupConfig{Lease: 5 * time.Second, MaxDeliveries: 3}, false); err != nil {
		return err
	}
	jobs := []string{"welcome:ann", "welcome:{{broken", "welcome:bob", "welcome:cy"}
	for _, j := range jobs {
		if _, err := d.c.Produce(ctx, topic, []client.Record{{Value: []byte(j)}}); err != nil {
			return err
		}
	}
	d.say("produced %d jobs; the second has a template that cannot render", len(jobs))

	fixed := false
	var mu sync.Mutex
	var sent []string
	handler := func(_ context.Context, job *client.Job) error {
		v := string(job.Value)
		if v == "welcome:{{broken" && !fixed {
			return client.Permanent(errors.New("template: unclosed action in {{broken"))
		}
		mu.Lock()
		sent = append(sent, v)
		mu.Unlock()
		return nil
	}
	sentSoFar := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(sent)
	}

	// Run the worker until the three good jobs are sent and the poison job
	// is in the dead-letter topic.
	var dead []client.FetchedRecord
	err := runWorker(ctx, d.c, topic, group, handler, func() (bool, error) {
		if len(sentSoFar()) < 3 {
			return false, nil
		}
		var err error
		dead, err = readAll(ctx, d.c, dlq)
		return len(dead) >= 1, err
	})
	if err != nil {
		return err
	}
	d.check(slices.Equal(sentSoFar(), []string{"welcome:ann", "welcome:bob", "welcome:cy"}), "the jobs behind the poison one completed: %v", sentSoFar())
	d.check(len(dead) == 1 && string(dead[0].Value) == "welcome:{{broken", "the poison job is in %s: %d record(s)", dlq, len(dead))
	if len(dead) != 1 {
		return nil
	}
	dl := dead[0]
	d.check(header(dl.Headers, "logd-dlq-reason") == "rejected" && header(dl.Headers, "logd-dlq-origin-offset") == "1",
		"with its reason %q, its error %q and its origin %s/%s@%s", header(dl.Headers, "logd-dlq-reason"),
		header(dl.Headers, "logd-dlq-error"), header(dl.Headers, "logd-dlq-origin-topic"),
		header(dl.Headers, "logd-dlq-origin-partition"), header(dl.Headers, "logd-dlq-origin-offset"))

	// Redrive: the dead letter goes back to its origin topic and partition
	// as a new record (same key, value and headers, plus a redrive count).
	fixed = true
	job, err := d.c.StartRedrive(ctx, client.RedriveOptions{DeadLetterTopic: dlq})
	if err != nil {
		return err
	}
	rr, err := d.c.WaitRedrive(ctx, job.ID, 50*time.Millisecond, nil)
	if err != nil {
		return err
	}
	d.check(rr.State == client.RedriveDone && rr.Progress.Redriven == 1, "the template is fixed; a redrive job (Client.StartRedrive) moved %d dead letter back to %s",
		rr.Progress.Redriven, topic)
	end, err := endOffset(ctx, d.c, topic)
	if err != nil {
		return err
	}
	err = runWorker(ctx, d.c, topic, group, handler, func() (bool, error) { return len(sentSoFar()) == 4, nil })
	if err != nil {
		return err
	}
	d.check(sentSoFar()[3] == "welcome:{{broken", "the redriven job (now offset %d) completed: %v", end-1, sentSoFar())
	return nil
}

// runWorker runs a Worker until done reports true (checked every 50 ms),
// then stops it and waits for it.
func runWorker(ctx context.Context, c *client.Client, topic, group string, h client.Handler, done func() (bool, error)) error {
	w, err := c.NewWorker(client.WorkerOptions{Topic: topic, Group: group, MaxWait: 200 * time.Millisecond}, h)
	if err != nil {
		return err
	}
	wctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, err := done()
		if ok || err != nil || time.Now().After(deadline) {
			stop()
			if rerr := <-ran; err == nil {
				err = rerr
			}
			if err == nil && !ok {
				err = fmt.Errorf("worker on %s/%s: not done after 20s", topic, group)
			}
			return err
		}
		time.Sleep(50 * time.Millisecond) // watching a running worker from outside
	}
}

// readAll reads every record of partition 0 of topic (nil if the topic does
// not exist yet).
func readAll(ctx context.Context, c *client.Client, topic string) ([]client.FetchedRecord, error) {
	var out []client.FetchedRecord
	off := int64(0)
	for {
		r, err := c.Fetch(ctx, client.FetchRequest{Topic: topic, Offset: off})
		if errors.Is(err, client.ErrUnknownTopic) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r.Records...)
		if r.Next >= r.End || len(r.Records) == 0 {
			return out, nil
		}
		off = r.Next
	}
}
