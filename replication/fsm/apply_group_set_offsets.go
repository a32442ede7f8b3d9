package fsm

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/logd-dev/logd/group"
)

// GroupSetOffsets sets (or with group.DeleteOffset removes) committed
// offsets of a consumer group whose members are coordinated outside the
// state machine: a Kafka consumer group, whose coordinator keeps members
// and generations in memory on the leader. Fence is the group generation
// the coordinator formed its own generation against (group.NoFence for a
// commit outside any generation); a reset since then refuses the commit
// (group.ConsumerGroup.SetOffsets).
type GroupSetOffsets struct {
	Group   string
	Fence   int64
	Offsets []group.OffsetCommit
	// Ends bounds offsets of partitions another data group hosts
	// (PartitionEnd).
	Ends []PartitionEnd
}

// Kafka members commit every few seconds each, so the payload is compact
// binary: the group, the fence (a zigzag varint), then runs of one topic's
// partitions, each run its topic name, a count and (partition uvarint,
// offset zigzag varint) pairs. Runs keep the order of Offsets. At
// groupEndsVersion the runs are followed by the ends: a count, then each
// end's topic name, partition (uvarint) and end (zigzag varint).

// EncodeGroupSetOffsets encodes c stamped with now, unsealed.
func EncodeGroupSetOffsets(now int64, c GroupSetOffsets) []byte {
	n := cmdHeaderSize + 2*binary.MaxVarintLen64 + len(c.Group) + len(c.Offsets)*(2*binary.MaxVarintLen64) + entryChecksumSize
	dst := encodeHeader(make([]byte, 0, n), CmdGroupSetOffsets, now)
	dst = binary.AppendUvarint(dst, uint64(len(c.Group)))
	dst = append(dst, c.Group...)
	dst = binary.AppendVarint(dst, c.Fence)
	var runs int
	for i := range c.Offsets {
		if i == 0 || c.Offsets[i].Topic != c.Offsets[i-1].Topic {
			runs++
		}
	}
	dst = binary.AppendUvarint(dst, uint64(runs))
	for i := 0; i < len(c.Offsets); {
		j := i + 1
		for j < len(c.Offsets) && c.Offsets[j].Topic == c.Offsets[i].Topic {
			j++
		}
		dst = binary.AppendUvarint(dst, uint64(len(c.Offsets[i].Topic)))
		dst = append(dst, c.Offsets[i].Topic...)
		dst = binary.AppendUvarint(dst, uint64(j-i))
		for _, o := range c.Offsets[i:j] {
			dst = binary.AppendUvarint(dst, uint64(uint32(o.Partition)))
			dst = binary.AppendVarint(dst, o.Offset)
		}
		i = j
	}
	if len(c.Ends) > 0 {
		dst[1] = groupEndsVersion
		dst = binary.AppendUvarint(dst, uint64(len(c.Ends)))
		for _, e := range c.Ends {
			dst = binary.AppendUvarint(dst, uint64(len(e.Topic)))
			dst = append(dst, e.Topic...)
			dst = binary.AppendUvarint(dst, uint64(uint32(e.Partition)))
			dst = binary.AppendVarint(dst, e.End)
		}
	}
	return dst
}

// decodeGroupSetOffsets reads the payload strictly: a count larger than
// the bytes left could hold, a partition number past int32, or (checked by
// binaryCommand) bytes after the last run are errors.
func decodeGroupSetOffsets(r *reader, version byte) GroupSetOffsets {
	c := GroupSetOffsets{Group: string(r.bytes()), Fence: r.varint()}
	runs := r.uvarint()
	if r.err == nil && runs > uint64(len(r.b)) {
		r.err = fmt.Errorf("%d topics in %d bytes", runs, len(r.b))
	}
	for i := uint64(0); i < runs && r.err == nil; i++ {
		topic := string(r.bytes())
		n := r.uvarint()
		if r.err == nil && (n == 0 || n > uint64(len(r.b))/2) {
			r.err = fmt.Errorf("%d partitions in %d bytes", n, len(r.b))
		}
		for j := uint64(0); j < n && r.err == nil; j++ {
			p := r.uvarint()
			off := r.varint()
			if r.err == nil && p > math.MaxInt32 {
				r.err = fmt.Errorf("partition %d", p)
			}
			c.Offsets = append(c.Offsets, group.OffsetCommit{TopicPartition: group.TopicPartition{Topic: topic, Partition: int32(p)}, Offset: off})
		}
	}
	if version < groupEndsVersion || r.err != nil {
		return c
	}
	n := r.uvarint()
	if r.err == nil && (n == 0 || n > uint64(len(r.b))/3) {
		r.err = fmt.Errorf("%d ends in %d bytes", n, len(r.b))
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		topic := string(r.bytes())
		p := r.uvarint()
		end := r.varint()
		if r.err == nil && p > math.MaxInt32 {
			r.err = fmt.Errorf("partition %d", p)
		}
		c.Ends = append(c.Ends, PartitionEnd{Topic: topic, Partition: int32(p), End: end})
	}
	return c
}

// applyGroupSetOffsets sets the offsets. The end-offset check is
// deterministic for the reason given in apply_group_commit.go. A commit
// creates its group; removing offsets of a group that does not exist is
// ErrConsumerGroupNotFound.
func (f *FSM) applyGroupSetOffsets(_ uint64, now int64, c GroupSetOffsets) any {
	if err := f.checkHostedOffsets(c.Ends, offsetPartitions(c.Offsets)...); err != nil {
		return err
	}
	create := slices.ContainsFunc(c.Offsets, func(o group.OffsetCommit) bool { return o.Offset >= 0 })
	return f.mutateGroup(c.Group, create, func(g *group.ConsumerGroup) (any, error) {
		return nil, g.SetOffsets(now, c.Fence, c.Offsets, fsmTopics{f, c.Ends})
	})
}

// GroupFence returns a consumer group's generation and its live members of
// logd's own protocol at now (group.ConsumerGroup.Fence), from applied
// state; ok is false when the group does not exist (its generation is then
// 0, which is what a group created by a commit starts at).
func (f *FSM) GroupFence(name string, now int64) (generation int64, liveMembers int, ok bool) {
	f.groups.mu.RLock()
	defer f.groups.mu.RUnlock()
	g, ok := f.groups.m[name]
	if !ok {
		return 0, 0, false
	}
	generation, liveMembers = g.Fence(now)
	return generation, liveMembers, true
}
