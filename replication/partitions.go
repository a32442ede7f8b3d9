package replication

import (
	"context"
	"fmt"
	"slices"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
)

// Partition growth (docs/architecture.md, "Rolling upgrades";
// fsm.PartitionsLevel): a topic's partition count grows by one
// create-partitions command, applied at one Raft index on every replica;
// it never shrinks.

// stampCreatePartitions fills in what the proposer adds to a growth of t:
// the topic incarnation it saw and this node's quota (Config.Quota),
// replacing whatever the caller put there.
func (b *Backend) stampCreatePartitions(t *fsm.Topic, c *fsm.CreatePartitions) {
	c.TopicIndex, c.Quota = t.CreateIndex, nil
	if !b.cfg.Quota.IsZero() {
		q := fsm.TopicQuota(b.cfg.Quota)
		c.Quota = &q
	}
	// A topic placed over data groups keeps its partitions where they
	// are; the new ones are placed as a new topic's would be, after them.
	if t.Placement != nil && int(c.Count) > len(t.Placement) {
		if more, epoch, err := b.placeTopic(context.Background(), t.Name, int(c.Count)); err == nil && more != nil {
			c.Placement = append(slices.Clone(t.Placement), more[len(t.Placement):]...)
			// A new epoch: data groups extend a topic's placement only
			// at a later one.
			c.PlacementEpoch = max(epoch, t.PlacementEpoch+1)
		}
	}
}

// checkCreatePartitions checks a stamped growth of t as Apply will, on
// this node's applied state, and that every member understands the
// command: *backend.PartitionCountError, *backend.QuotaError, *backend.FeatureLevelError.
func (b *Backend) checkCreatePartitions(t *fsm.Topic, c fsm.CreatePartitions) error {
	if err := fsm.ValidateCreatePartitions(t, c); err != nil {
		return err
	}
	if int(c.Count) == len(t.Partitions) {
		return nil
	}
	if err := b.fsm.CheckGrowthQuota(t, c); err != nil {
		return err
	}
	level, err := b.featureLevel()
	if err != nil {
		return err
	}
	return allows("create-partitions", fsm.PartitionsLevel, level)
}

// createPartitions grows a topic to c.Count partitions and returns the
// topic as it stands afterwards. A count equal to the topic's changes
// nothing and proposes nothing (counts never shrink, so a topic that has
// it keeps it): a retry after an unknown outcome succeeds. Errors:
// backend.ErrUnknownTopic, *backend.PartitionCountError (a smaller count, or one above
// backend.MaxPartitions), *backend.QuotaError, *backend.FeatureLevelError; then nothing
// changed.
func (b *Backend) createPartitions(ctx context.Context, c fsm.CreatePartitions) (*fsm.Topic, error) {
	t, err := b.fsm.Topic(c.Name)
	if err != nil {
		return nil, err
	}
	b.stampCreatePartitions(t, &c)
	if err := b.checkCreatePartitions(t, c); err != nil {
		return nil, err
	}
	if int(c.Count) == len(t.Partitions) {
		return t, nil
	}
	data, err := fsm.EncodeJSON(fsm.CmdCreatePartitions, b.cfg.Now().UnixNano(), c)
	if err != nil {
		return nil, err
	}
	res, err := b.propose(ctx, data)
	if err != nil {
		return nil, err
	}
	nt, ok := res.(*fsm.Topic)
	if !ok {
		return nil, fmt.Errorf("create partitions of %s: unexpected result %T", c.Name, res)
	}
	return nt, nil
}

// CreatePartitions grows a topic's partition count through Raft and
// returns the topic as applied (Node.CreatePartitions lists the errors).
func (b *Backend) CreatePartitions(ctx context.Context, c backend.CreatePartitions) (backend.TopicInfo, error) {
	t, err := b.createPartitions(ctx, fsm.CreatePartitions{Name: c.Name, Count: c.Count})
	if err != nil {
		return backend.TopicInfo{}, err
	}
	return topicInfo(t), nil
}

// ValidateCreatePartitions checks a growth as CreatePartitions does before
// it proposes it, quota and feature level included, without proposing
// anything.
func (b *Backend) ValidateCreatePartitions(r backend.CreatePartitions) error {
	t, err := b.FSM().Topic(r.Name)
	if err != nil {
		return err
	}
	c := fsm.CreatePartitions{Name: r.Name, Count: r.Count}
	b.stampCreatePartitions(t, &c)
	return b.checkCreatePartitions(t, c)
}
