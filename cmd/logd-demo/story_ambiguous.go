package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/logd-dev/logd/client"
)

// loseReply is an HTTP transport that, while armed, lets one Produce reach
// the server and then drops the connection before the reply: the write
// happened, but the client cannot know.
type loseReply struct {
	next  http.RoundTripper
	armed atomic.Bool
}

func (t *loseReply) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil && strings.HasSuffix(req.URL.Path, "/Produce") && t.armed.CompareAndSwap(true, false) {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, io.ErrUnexpectedEOF
	}
	return resp, err
}

// storyAmbiguous: the reply to a produce is lost. Without an idempotency
// key the client cannot tell whether the record was written, so it returns
// the error (and a blind retry would write it twice). With an idempotency
// key the client retries by itself, and logd answers with the original
// offset instead of appending again.
func storyAmbiguous(ctx context.Context, d *demo) error {
	const topic = "payments"
	if _, err := d.c.CreateTopic(ctx, topic, 1, nil); err != nil {
		return err
	}
	tr := &loseReply{next: http.DefaultTransport.(*http.Transport).Clone()}
	c, err := client.New(d.srv.addr, client.Options{Timeout: 5 * time.Second, HTTPClient: &http.Client{Transport: tr},
		Retry: client.RetryPolicy{OnRetry: func(e client.RetryEvent) {
			d.say("client: %s attempt %d failed (%v); retrying after %v", e.Method, e.Attempt, e.Err, e.Delay.Round(time.Millisecond))
		}}})
	if err != nil {
		return err
	}
	defer c.Close()

	tr.armed.Store(true)
	_, err = c.Produce(ctx, topic, []client.Record{{Value: []byte("pay 5 to ann")}})
	d.check(err != nil && !errors.Is(err, client.ErrIdempotencyConflict), "without an idempotency key the lost reply is an error the caller must judge: %v", err)
	end, err := endOffset(ctx, d.c, topic)
	if err != nil {
		return err
	}
	d.check(end == 1, "... and the record was in fact written (end offset %d)", end)

	tr.armed.Store(true)
	res, err := c.Produce(ctx, topic, []client.Record{{Value: []byte("pay 12 to bob"), IdempotencyKey: "payment-1042"}})
	if err != nil {
		return err
	}
	end, err = endOffset(ctx, d.c, topic)
	if err != nil {
		return err
	}
	d.check(res[0].Duplicate && res[0].Offset == 1 && end == 2,
		"with idempotency key payment-1042 the retry returned the original offset %d (duplicate=%v), written once (end offset %d)", res[0].Offset, res[0].Duplicate, end)
	return nil
}

func endOffset(ctx context.Context, c *client.Client, topic string) (int64, error) {
	desc, err := c.DescribeTopic(ctx, topic)
	if err != nil {
		return 0, err
	}
	return desc.Partitions[0].End, nil
}
