package group

import "fmt"

// Groups coordinated outside this package. A Kafka consumer group's
// members, generations and assignments live in its coordinator's memory
// (package kafka, on the Raft leader): the members assign partitions
// themselves and the coordinator only relays their plan. What the group
// commits must still be the replicated offsets every other reader sees
// (`logctl group describe`, lag, resets), so the coordinator writes them
// with SetOffsets, fenced by this group's generation: an operator's reset
// (ResetOffsets) bumps the generation, and every commit the coordinator
// checked against the generation before the reset is refused, so no
// member can write over the reset.

// NoFence is the fence of a SetOffsets that does not check the
// generation: a commit outside any generation (Kafka's "simple" commit of
// a group without members, used by tools and by consumers that assign
// partitions themselves) or the deletion of offsets.
const NoFence int64 = -1

// DeleteOffset as the offset of a SetOffsets removes the partition's
// committed offset.
const DeleteOffset int64 = -1

// SetOffsets sets committed offsets for a group whose members are
// coordinated outside this package. Unlike Commit, an offset may move
// backwards (the coordinator's members own their positions, and a member
// that seeks back and commits means it), and DeleteOffset removes one.
//
// fence is the generation the coordinator formed its own generation
// against: unless it is NoFence, a group whose generation differs (an
// offset reset, or a member of logd's protocol, changed it since) refuses
// the whole commit with ErrStaleGeneration. A group with live members of
// logd's own protocol refuses it with ErrUnknownMember: one group is
// coordinated by one protocol at a time. Offsets must be at most the
// partition's end (ErrOffsetAboveEnd); the partitions must exist.
//
// Like every mutating method it first expires members past their session
// at now; apart from that a refused request changes nothing.
func (g *ConsumerGroup) SetOffsets(now, fence int64, offsets []OffsetCommit, topics Topics) error {
	if len(offsets) == 0 {
		return fmt.Errorf("%w: commit without offsets", ErrInvalidGroupRequest)
	}
	if fence < NoFence {
		return fmt.Errorf("%w: fence %d", ErrInvalidGroupRequest, fence)
	}
	for _, o := range offsets {
		if err := cgCheckPartition(o.TopicPartition, topics); err != nil {
			return err
		}
		if o.Offset < DeleteOffset {
			return fmt.Errorf("%w: negative offset %d for %s-%d", ErrInvalidGroupRequest, o.Offset, o.Topic, o.Partition)
		}
		if end := topics.EndOffset(o.Topic, o.Partition); o.Offset > end {
			return fmt.Errorf("%w: %d for %s-%d, which ends at %d", ErrOffsetAboveEnd, o.Offset, o.Topic, o.Partition, end)
		}
	}
	g.Expire(now, topics)
	if len(g.Members) > 0 {
		return fmt.Errorf("%w: group %q has %d live members of logd's protocol; one group is coordinated by one protocol at a time", ErrUnknownMember, g.Name, len(g.Members))
	}
	if fence != NoFence && fence != g.Generation {
		return fmt.Errorf("%w: group %q is at generation %d, the commit was fenced at %d (its offsets were reset)", ErrStaleGeneration, g.Name, g.Generation, fence)
	}
	for _, o := range offsets {
		if o.Offset == DeleteOffset {
			if cp := g.cgCurrentPartition(o.TopicPartition, topics); cp != nil {
				cp.Committed, cp.CommittedAt = -1, now
			}
			continue
		}
		cp := g.cgEnsurePartition(o.TopicPartition, topics)
		cp.Committed, cp.CommittedAt = o.Offset, now
	}
	return nil
}

// Fence returns the generation a coordinator outside this package checks
// its commits against (SetOffsets) and how many members of logd's own
// protocol are live at now (LastSeen + SessionTimeout not passed). It
// changes nothing.
func (g *ConsumerGroup) Fence(now int64) (generation int64, liveMembers int) {
	for _, m := range g.Members {
		if now-m.LastSeen <= m.SessionTimeout {
			liveMembers++
		}
	}
	return g.Generation, liveMembers
}

// cgCurrentPartition returns the group's state of a partition if it
// belongs to the topic's current incarnation, else nil.
func (g *ConsumerGroup) cgCurrentPartition(tp TopicPartition, topics Topics) *ConsumerPartition {
	t, ok := g.Topics[tp.Topic]
	if !ok {
		return nil
	}
	if _, inc, ok := topics.Topic(tp.Topic); !ok || inc != t.Incarnation {
		return nil
	}
	return g.cgPartition(tp)
}
