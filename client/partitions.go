package client

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// PartitionGrowth is the outcome of CreatePartitions.
type PartitionGrowth struct {
	// Topic is the topic afterwards (with ValidateOnly, as it stands).
	Topic Topic `json:"topic"`
	// Previous is the partition count before the call (before its last
	// attempt, after a retry).
	Previous int32 `json:"previous_partitions"`
	// ValidateOnly: the growth was checked, not made.
	ValidateOnly bool `json:"validate_only"`
}

// CreatePartitions grows a topic to count partitions (the new total, not
// the number to add). The new partitions start empty at offset 0. Keyed
// records produced afterwards map by murmur2 over the new count, so a key
// may go to another partition than before: its records are then ordered
// within each partition, not across the growth. A Producer reads the
// count when it is made (NewProducer), so one made before the growth keeps
// to the partitions it knew; a group consumer is assigned the new
// partitions at its next heartbeat.
//
// With validateOnly every check runs (count, quotas, permission, every
// node's build) and nothing changes. It fails with ErrUnknownTopic, and
// with ErrInvalidArgument for a count below the topic's (partitions are
// never removed), above the per-topic limit or past the cluster's
// partition quota; then nothing changed. The count the topic has already
// succeeds without change, so any failure is retried (see RetryPolicy).
func (c *Client) CreatePartitions(ctx context.Context, name string, count int32, validateOnly bool) (PartitionGrowth, error) {
	req := &logdv1.CreatePartitionsRequest{Name: name, Count: count, ValidateOnly: validateOnly}
	var out PartitionGrowth
	class := retryRepeatable
	if validateOnly {
		class = retryAny
	}
	err := c.do(ctx, "CreatePartitions", class, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.CreatePartitions(ctx, connect.NewRequest(req))
		if err != nil {
			return fromRPC(err)
		}
		out = PartitionGrowth{Topic: topicFromProto(resp.Msg.GetTopic()), Previous: resp.Msg.GetPreviousCount(), ValidateOnly: validateOnly}
		return nil
	})
	if err != nil {
		return PartitionGrowth{}, fmt.Errorf("create partitions of topic %q: %w", name, err)
	}
	return out, nil
}
