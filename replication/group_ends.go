package replication

import (
	"context"
	"errors"
	"fmt"

	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/replication/fsm"
)

// Consumer groups over topics placed on data groups (docs/architecture.md,
// "Data groups"): a consumer group's state (members, generations,
// committed offsets) stays in the meta group, which holds none of the
// partitions of a placed topic. A command naming offsets of such a
// partition carries the partition's end (fsm.PartitionEnd), read here from
// the partition's data group, and the meta group's state machine bounds
// the offsets by it as it bounds its own partitions' by their applied end.

// CheckPlacedGroups says whether consumer groups may read topics placed
// on data groups: nil once every member's build applies offsets carrying
// their partitions' ends (fsm.PlacedGroupsLevel), a
// *backend.FeatureLevelError before.
func (n *Node) CheckPlacedGroups() error {
	cluster, err := n.featureLevel()
	if err != nil {
		return err
	}
	return allows("consumer groups on topics placed over data groups", fsm.PlacedGroupsLevel, cluster)
}

// placedTopics refuses, with a *backend.FeatureLevelError, topics placed
// over data groups among topics until every member applies consumer group
// commands on them (CheckPlacedGroups).
func (n *Node) placedTopics(topics []string) error {
	for _, name := range topics {
		if t, err := n.fsm.Topic(name); err == nil && t.Placement != nil {
			return n.CheckPlacedGroups()
		}
	}
	return nil
}

// placedEnds returns the end of each partition of offsets that a data
// group hosts, for the consumer group command naming offsets to carry. A
// replica of the partition's group on this node that caught up answers
// when its end is at or above the offset named (a negative offset, a
// removal, takes any end); otherwise the group's leader answers, once it
// confirmed its leadership, so an offset a consumer read from the leader
// is never refused as above the end. nil when no partition is placed.
func (b *Backend) placedEnds(ctx context.Context, offsets []group.OffsetCommit) ([]fsm.PartitionEnd, error) {
	var placed []group.OffsetCommit
	for _, o := range offsets {
		t, err := b.fsm.Topic(o.Topic)
		if err != nil || t.Placement == nil || o.Partition < 0 || int(o.Partition) >= len(t.Partitions) {
			continue // left to the group's own checks
		}
		if _, err := t.Partition(o.Partition); err == nil {
			continue // the meta group holds it
		}
		placed = append(placed, o)
	}
	if len(placed) == 0 {
		return nil, nil
	}
	if err := b.CheckPlacedGroups(); err != nil {
		return nil, err
	}
	ends := make([]fsm.PartitionEnd, len(placed))
	errs := inParallel(len(placed), func(i int) error {
		o := placed[i]
		ends[i] = fsm.PartitionEnd{Topic: o.Topic, Partition: o.Partition}
		if end, ok := b.localEnd(o.Topic, o.Partition); ok && end >= o.Offset {
			ends[i].End = end
			return nil
		}
		bounds, err := b.OffsetsLeader(ctx, o.Topic, o.Partition)
		if err != nil {
			return fmt.Errorf("the end of %s-%d: %w", o.Topic, o.Partition, err)
		}
		ends[i].End = bounds.End
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ends, nil
}

// localEnd returns a partition's end from this node's replica of its data
// group, when it holds one that caught up with its group.
func (b *Backend) localEnd(topic string, p int32) (int64, bool) {
	f, err := b.partitionFSM(topic, p)
	if err != nil {
		return 0, false
	}
	part, err := f.Partition(topic, p)
	if err != nil {
		return 0, false
	}
	return part.Log().EndOffset(), true
}
