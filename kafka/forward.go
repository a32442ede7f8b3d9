package kafka

import (
	"context"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
)

// Forwarder makes a topic change (CreateTopics, DeleteTopics,
// CreatePartitions, the config changes), or hands out a producer id
// (InitProducerId), on the Raft leader for a node
// that does not lead, on behalf of the principal a Kafka connection
// authenticated as (auth.Anonymous without authentication; a
// certificate's otherwise), as the Connect API forwards its writes:
// Kafka's own brokers forward these to their controller (KIP-590), and
// kgo and sarama send IncrementalAlterConfigs to any broker without
// retrying NOT_CONTROLLER. cmd/logd implements it over the leader's API.
// The errors are the backend's.
type Forwarder interface {
	CreateTopic(ctx context.Context, p auth.Principal, c backend.CreateTopic) (backend.TopicInfo, error)
	AlterTopic(ctx context.Context, p auth.Principal, c backend.AlterTopic) (backend.TopicInfo, error)
	DeleteTopic(ctx context.Context, p auth.Principal, name string) error
	CreatePartitions(ctx context.Context, p auth.Principal, c backend.CreatePartitions) (backend.TopicInfo, error)
	// InitProducerID hands out a producer id on the leader for an
	// idempotent producer whose right rests on write on topic ("": on
	// the cluster).
	InitProducerID(ctx context.Context, p auth.Principal, topic string) (int64, int16, error)
}

// topicWriter is where a request's topic changes go: the backend on the
// leader, the leader through the Forwarder elsewhere.
type topicWriter interface {
	CreateTopic(ctx context.Context, c backend.CreateTopic) (backend.TopicInfo, error)
	AlterTopic(ctx context.Context, c backend.AlterTopic) (backend.TopicInfo, error)
	DeleteTopic(ctx context.Context, name string) error
	CreatePartitions(ctx context.Context, c backend.CreatePartitions) (backend.TopicInfo, error)
}

// writer returns the request's topicWriter, or nil when this node does
// not lead and forwards nothing (NOT_CONTROLLER). The principal was
// checked here against this node's ACLs; the leader checks it again.
func (rc *reqCtx) writer(leader bool) topicWriter {
	s := rc.c.s
	switch {
	case leader:
		return s.b
	case s.forward != nil:
		return forwarded{f: s.forward, p: rc.c.principal}
	}
	return nil
}

// forwarded is a Forwarder bound to a principal.
type forwarded struct {
	f Forwarder
	p auth.Principal
}

func (w forwarded) CreateTopic(ctx context.Context, c backend.CreateTopic) (backend.TopicInfo, error) {
	return w.f.CreateTopic(ctx, w.p, c)
}

func (w forwarded) AlterTopic(ctx context.Context, c backend.AlterTopic) (backend.TopicInfo, error) {
	return w.f.AlterTopic(ctx, w.p, c)
}

func (w forwarded) DeleteTopic(ctx context.Context, name string) error {
	return w.f.DeleteTopic(ctx, w.p, name)
}

func (w forwarded) CreatePartitions(ctx context.Context, c backend.CreatePartitions) (backend.TopicInfo, error) {
	return w.f.CreatePartitions(ctx, w.p, c)
}
