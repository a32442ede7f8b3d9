package fsm

import (
	"fmt"
	"slices"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/queue"
)

// Data groups (docs/architecture.md, "Data groups"): a state machine runs
// for one data group (Config.Group; 0 is the meta group, which is also
// data group 0), and a topic's Placement names the data group of each of
// its partitions. This state machine opens, snapshots and applies to the
// partitions its group hosts only; every command or read that names
// another group's partition is refused with a *PartitionElsewhereError
// and changes nothing. A topic without a placement is hosted whole here,
// as every topic was before DataGroupLevel.

// hosts reports whether this state machine's data group hosts partition
// p (which may be past len(t.Partitions) while the topic is opened).
func (t *Topic) hosts(p int32) bool {
	return t.Placement == nil || int(p) < len(t.Placement) && t.Placement[p] == t.group
}

// PartitionGroup returns the data group that hosts partition p: the
// state machine's own for a topic without a placement.
func (t *Topic) PartitionGroup(p int32) uint64 {
	if t.Placement == nil || p < 0 || int(p) >= len(t.Placement) {
		return t.group
	}
	return t.Placement[p]
}

// Partition returns partition p of the topic: backend.ErrUnknownPartition
// when the topic has no partition p, a *PartitionElsewhereError when
// another data group hosts it.
func (t *Topic) Partition(p int32) (*Partition, error) {
	if p < 0 || int(p) >= len(t.Partitions) {
		return nil, fmt.Errorf("%w: %s has %d partitions, not %d", backend.ErrUnknownPartition, t.Name, len(t.Partitions), p)
	}
	if t.Partitions[p] == nil {
		return nil, &PartitionElsewhereError{Topic: t.Name, Partition: p, Group: t.PartitionGroup(p)}
	}
	return t.Partitions[p], nil
}

// Hosted returns the partitions this state machine hosts, in index order
// (all of them for a topic without a placement). The slice is the
// caller's; the partitions are shared.
func (t *Topic) Hosted() []*Partition {
	out := make([]*Partition, 0, len(t.Partitions))
	for _, p := range t.Partitions {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// Sparse reports whether another data group hosts any of the topic's
// partitions.
func (t *Topic) Sparse() bool {
	for _, p := range t.Partitions {
		if p == nil {
			return true
		}
	}
	return false
}

// validatePlacement checks a placement of a topic of n partitions: one
// data group per partition. nil places none (every partition here).
func validatePlacement(placement []uint64, n int32) error {
	if placement != nil && len(placement) != int(n) {
		return fmt.Errorf("%w: placement of %d partitions for %d", backend.ErrInvalidArgument, len(placement), n)
	}
	return nil
}

// samePlacementPrefix reports whether the placement next keeps every
// partition of cur (a topic's current placement, nil meaning every one of
// its n partitions in group) where it is.
func samePlacementPrefix(cur []uint64, n int, group uint64, next []uint64) bool {
	if len(next) < n {
		return false
	}
	if cur == nil {
		return !slices.ContainsFunc(next[:n], func(g uint64) bool { return g != group })
	}
	return slices.Equal(cur, next[:n])
}

// checkHosted refuses, with a *PartitionElsewhereError, a command naming
// a partition of t another data group hosts. Partitions out of range are
// left to the command's own checks.
func checkHosted(t *Topic, partitions ...int32) error {
	for _, p := range partitions {
		if p >= 0 && int(p) < len(t.Partitions) && t.Partitions[p] == nil {
			return &PartitionElsewhereError{Topic: t.Name, Partition: p, Group: t.PartitionGroup(p)}
		}
	}
	return nil
}

// checkHostedOffsets refuses, with a *PartitionElsewhereError, offsets of
// a partition another data group hosts unless ends carries its end (read
// by the proposer from that group): without one this state machine cannot
// bound them, and they would otherwise be refused as above an end of 0.
// Unknown topics and partitions are left to the group's own checks.
func (f *FSM) checkHostedOffsets(ends []PartitionEnd, tps ...group.TopicPartition) error {
	for _, tp := range tps {
		t, err := f.Topic(tp.Topic)
		if err != nil {
			continue
		}
		if err := checkHosted(t, tp.Partition); err != nil {
			if _, ok := endOf(ends, tp.Topic, tp.Partition); ok {
				continue
			}
			return err
		}
	}
	return nil
}

// offsetPartitions lists the partitions of offsets.
func offsetPartitions(offsets []group.OffsetCommit) []group.TopicPartition {
	out := make([]group.TopicPartition, len(offsets))
	for i, o := range offsets {
		out[i] = o.TopicPartition
	}
	return out
}

// TokenPartitions lists the partitions of queue tokens.
func TokenPartitions(tokens []queue.Token) []int32 {
	out := make([]int32, len(tokens))
	for i, tk := range tokens {
		out[i] = tk.Partition
	}
	return out
}
