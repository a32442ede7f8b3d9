package client

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// AlterTopic changes a topic's settings: each key of set takes its value,
// each key of reset returns to its default, and every other setting keeps
// its value. It returns the topic with its effective settings afterwards.
// It fails with ErrUnknownTopic if the topic does not exist, and with
// ErrInvalidArgument for an unknown key, an invalid value or a key both set
// and reset; then nothing changed. Setting values is idempotent, so any
// failure is retried (see RetryPolicy).
func (c *Client) AlterTopic(ctx context.Context, name string, set map[string]string, reset []string) (Topic, error) {
	req := &logdv1.AlterTopicRequest{Name: name, Config: set, DeleteConfig: reset}
	var out Topic
	err := c.do(ctx, "AlterTopic", retryRepeatable, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.AlterTopic(ctx, connect.NewRequest(req))
		if err != nil {
			return fromRPC(err)
		}
		out = topicFromProto(resp.Msg.GetTopic())
		return nil
	})
	if err != nil {
		return Topic{}, fmt.Errorf("alter topic %q: %w", name, err)
	}
	return out, nil
}
