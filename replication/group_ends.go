package replication

import (
	"context"

	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/replication/fsm"
)

// Consumer groups over topics placed on data groups (docs/architecture.md,
// "Data groups"): a consumer group's home (the meta group, or a data
// group: groups_route.go) hosts only some of the partitions the group
// consumes. A command naming offsets of another partition carries the
// partition's end (fsm.PartitionEnd), read by the proposer from the
// partition's group (endsFor), and the home's state machine bounds the
// offsets by it as it bounds its own partitions' by their applied end.

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
// group hosts, for a command of the meta group naming offsets to carry
// (endsFor); nil when no partition is placed.
func (b *Backend) placedEnds(ctx context.Context, offsets []group.OffsetCommit) ([]fsm.PartitionEnd, error) {
	return b.endsFor(ctx, 0, offsets)
}

// localEnd returns a partition's end from this node's replica of its data
// group, when it holds one that caught up with its group.
func (b *Backend) localEnd(topic string, p int32) (int64, bool) {
	f, err := b.partitionFSM(topic, p)
	if err != nil {
		return 0, false
	}
	part, err := groupPartition(b.fsm, f, topic, p)
	if err != nil {
		return 0, false
	}
	return part.Log().EndOffset(), true
}
