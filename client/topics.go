package client

import (
	"context"
	"fmt"
	"maps"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// Topic is a topic's identity and effective settings.
type Topic struct {
	Name       string `json:"name"`
	Partitions int32  `json:"partitions"`
	// Config holds the effective settings (Kafka names), defaults included.
	Config map[string]string `json:"config,omitempty"`
	// Created is when the leader created the topic.
	Created time.Time `json:"created"`
}

// PartitionInfo is one partition's state on the answering node.
type PartitionInfo struct {
	Partition int32 `json:"partition"`
	// LogStart is the first readable offset.
	LogStart int64 `json:"log_start_offset"`
	// End is the next offset to be written.
	End      int64 `json:"end_offset"`
	Bytes    int64 `json:"bytes"`
	Segments int32 `json:"segments"`
	// CompactedSegments counts segments rewritten by compaction.
	CompactedSegments int32 `json:"compacted_segments"`
	// LastCleanerRun is the last retention or compaction run that changed
	// the partition; nil when none is known.
	LastCleanerRun *CleanerRun `json:"last_cleaner_run,omitempty"`
	// DataGroup is the data group that holds the partition (0: the meta
	// group), Leader the node the answering node knows leads it ("" when
	// it does not know).
	DataGroup uint64 `json:"data_group"`
	Leader    string `json:"leader,omitempty"`
}

// CleanerRun is a retention or compaction run applied to a partition.
type CleanerRun struct {
	// Time is the leader's time of the run.
	Time time.Time `json:"time"`
	// Action is "trim" (closed segments deleted) or "compact".
	Action string `json:"action"`
	// BytesDeleted is how much smaller the partition became.
	BytesDeleted int64 `json:"bytes_deleted"`
	// RecordsRemoved counts records compaction removed.
	RecordsRemoved int64 `json:"records_removed"`
}

func cleanerRunFromProto(r *logdv1.CleanerRun) *CleanerRun {
	if r == nil {
		return nil
	}
	return &CleanerRun{Time: msToTime(r.GetTimeMs()), Action: r.GetAction(), BytesDeleted: r.GetBytesDeleted(), RecordsRemoved: r.GetRecordsRemoved()}
}

// TopicDescription is a topic with the state of each partition.
type TopicDescription struct {
	Topic      Topic           `json:"topic"`
	Partitions []PartitionInfo `json:"partition_state"`
}

func topicFromProto(t *logdv1.TopicInfo) Topic {
	return Topic{
		Name:       t.GetName(),
		Partitions: t.GetPartitions(),
		Config:     maps.Clone(t.GetConfig()),
		Created:    msToTime(t.GetCreatedMs()),
	}
}

// CreateTopic creates a topic with the given number of partitions and
// settings (nil for defaults). It fails with ErrTopicExists if the topic
// exists and ErrInvalidArgument for a bad name, count or setting. It is
// retried only when nothing can have been written (see RetryPolicy).
func (c *Client) CreateTopic(ctx context.Context, name string, partitions int32, config map[string]string) (Topic, error) {
	req := &logdv1.CreateTopicRequest{Name: name, Partitions: partitions, Config: config}
	var out Topic
	err := c.do(ctx, "CreateTopic", retryUnwritten, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.CreateTopic(ctx, connect.NewRequest(req))
		if err != nil {
			return fromRPC(err)
		}
		out = topicFromProto(resp.Msg.GetTopic())
		return nil
	})
	if err != nil {
		return Topic{}, fmt.Errorf("create topic %q: %w", name, err)
	}
	return out, nil
}

// ListTopics returns every topic, in the server's order.
func (c *Client) ListTopics(ctx context.Context) ([]Topic, error) {
	var out []Topic
	err := c.do(ctx, "ListTopics", retryAny, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.ListTopics(ctx, connect.NewRequest(&logdv1.ListTopicsRequest{}))
		if err != nil {
			return fromRPC(err)
		}
		out = make([]Topic, 0, len(resp.Msg.GetTopics()))
		for _, t := range resp.Msg.GetTopics() {
			out = append(out, topicFromProto(t))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	return out, nil
}

// DescribeTopic returns a topic's settings and the state of each of its
// partitions on the answering node. It fails with ErrUnknownTopic if the
// topic does not exist.
func (c *Client) DescribeTopic(ctx context.Context, name string) (TopicDescription, error) {
	var out TopicDescription
	err := c.do(ctx, "DescribeTopic", retryAny, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.DescribeTopic(ctx, connect.NewRequest(&logdv1.DescribeTopicRequest{Name: name}))
		if err != nil {
			return fromRPC(err)
		}
		out = TopicDescription{Topic: topicFromProto(resp.Msg.GetTopic())}
		for _, p := range resp.Msg.GetPartitions() {
			out.Partitions = append(out.Partitions, PartitionInfo{
				Partition: p.GetPartition(),
				LogStart:  p.GetLogStartOffset(),
				End:       p.GetEndOffset(),
				Bytes:     p.GetBytes(),
				Segments:  p.GetSegments(),

				CompactedSegments: p.GetCompactedSegments(),
				LastCleanerRun:    cleanerRunFromProto(p.GetLastCleanerRun()),
				DataGroup:         p.GetDataGroup(),
				Leader:            p.GetLeader(),
			})
		}
		return nil
	})
	if err != nil {
		return TopicDescription{}, fmt.Errorf("describe topic %q: %w", name, err)
	}
	return out, nil
}

// DeleteTopic deletes a topic and its data. It fails with ErrUnknownTopic if
// the topic does not exist.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	err := c.do(ctx, "DeleteTopic", retryUnwritten, c.opts.Timeout, func(ctx context.Context) error {
		_, err := c.rpc.DeleteTopic(ctx, connect.NewRequest(&logdv1.DeleteTopicRequest{Name: name}))
		return fromRPC(err)
	})
	if err != nil {
		return fmt.Errorf("delete topic %q: %w", name, err)
	}
	return nil
}
