package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
)

// maxCommitPartitions bounds the partitions of one OffsetCommit, as the
// Connect API bounds one commit.
const maxCommitPartitions = 100_000

// offsetCommit answers OffsetCommit (versions 2 to 9): the offsets become
// the group's committed offsets, logd's own (`logctl group describe`
// shows them), in one Raft entry. A member commits with its generation,
// which must be the group's (ILLEGAL_GENERATION otherwise, and
// REBALANCE_IN_PROGRESS while the generation's plan is awaited); the
// commit carries the generation's fence, so a reset since it formed
// refuses it. The principal needs to read the group and each topic
// (GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED for that topic
// only). Generation -1 with no member id is a commit outside any
// generation (tools; consumers that assign partitions themselves): only
// while the group has no members (UNKNOWN_MEMBER_ID otherwise). An offset
// may move backwards, as in Kafka; one below 0 or past the partition's end
// removes the committed offset. Leader epochs and metadata are not kept.
func (s *Server) offsetCommit(ctx context.Context, rc *reqCtx, req *kmsg.OffsetCommitRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	n := 0
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
			n++
		}
		resp.Topics = append(resp.Topics, rt)
	}
	setAll := func(code int16) {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if resp.Topics[i].Partitions[j].ErrorCode == errNone {
					resp.Topics[i].Partitions[j].ErrorCode = code
				}
			}
		}
	}
	defer func() {
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				rc.note(p.ErrorCode)
			}
		}
	}()
	switch {
	case group.ValidateName("group", req.Group) != nil:
		setAll(errInvalidGroupID)
		return resp
	case !rc.mayGroup(req.Group):
		setAll(errGroupAuthorizationFailed)
		return resp
	case n > maxCommitPartitions:
		setAll(errInvalidRequest)
		return resp
	case !s.groups.lead(ctx, req.Group, true):
		setAll(errNotCoordinator)
		return resp
	}
	for i, t := range req.Topics {
		if !rc.mayTopic(t.Topic) {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = errTopicAuthorizationFailed
			}
		}
	}
	fence, code := s.groups.checkCommit(req)
	if code != errNone {
		setAll(code)
		return resp
	}
	var offsets []group.OffsetCommit
	var sent []*kmsg.OffsetCommitResponseTopicPartition
	for i, t := range req.Topics {
		info, err := s.b.Topic(t.Topic)
		for j, p := range t.Partitions {
			rp := &resp.Topics[i].Partitions[j]
			if rp.ErrorCode != errNone {
				continue // not authorized
			}
			if err != nil || p.Partition < 0 || p.Partition >= info.Partitions {
				rp.ErrorCode = errUnknownTopicOrPartition
				continue
			}
			// The bounds as the partition's leader has them: a data
			// group's replica here may trail it, and an offset a
			// consumer read from the leader would look past the end.
			// While no leader answers, NOT_COORDINATOR: the client
			// finds the coordinator again and commits again.
			o, err := s.b.OffsetsLeader(ctx, t.Topic, p.Partition)
			if err != nil {
				rp.ErrorCode = groupCode(err)
				continue
			}
			offset := p.Offset
			if offset < 0 || offset > o.End {
				// Not an offset of the partition: Kafka's brokers store it
				// as sent, and a consumer that reads it back (a negative
				// one from OffsetFetch, one past the end from its fetch's
				// OFFSET_OUT_OF_RANGE) starts where its reset policy
				// says. logd's group offsets are offsets of the log, so
				// the commit removes the partition's offset instead, and
				// the consumer applies its reset policy all the same.
				// kafkajs's admin.resetOffsets commits -2 (earliest) and
				// -1 (latest) this way (docs/kafka.md).
				offset = group.DeleteOffset
			}
			offsets = append(offsets, group.OffsetCommit{TopicPartition: group.TopicPartition{Topic: t.Topic, Partition: p.Partition}, Offset: offset})
			sent = append(sent, rp)
		}
	}
	if len(offsets) == 0 {
		return resp
	}
	err := s.b.SetGroupOffsets(ctx, backend.GroupSetOffsets{Group: req.Group, Fence: fence, Offsets: offsets})
	if errors.Is(err, group.ErrConsumerGroupNotFound) {
		// Only removals, of a group that has no offsets: nothing to
		// remove.
		err = nil
	}
	if err != nil {
		if errors.Is(err, group.ErrStaleGeneration) && fence != group.NoFence {
			s.groups.staleCommit(req.Group, req.Generation)
		}
		if code := groupCode(err); code == errUnknownServer || code == errRequestTimedOut {
			s.logger.Debug("kafka: offset commit", "group", req.Group, "err", err)
		}
	}
	for _, rp := range sent {
		rp.ErrorCode = groupCode(err)
	}
	return resp
}

// checkCommit checks a commit against the group and returns the fence it
// carries: group.NoFence for a commit outside any generation.
func (c *coordinator) checkCommit(req *kmsg.OffsetCommitRequest) (int64, int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, errNotCoordinator
	}
	g := c.groups[req.Group]
	if req.Generation < 0 && req.MemberID == "" && req.InstanceID == nil {
		if g != nil && (g.state != groupEmpty || len(g.members) > 0) {
			return 0, errUnknownMemberID
		}
		return group.NoFence, errNone
	}
	m, code := c.checkMember(g, req.MemberID, req.InstanceID)
	switch {
	case code != errNone:
		return 0, code
	case req.Generation != g.generation:
		return 0, errIllegalGeneration
	case g.state == groupCompletingRebalance:
		return 0, errRebalanceInProgress
	}
	c.touch(g, m)
	if c.fenceMoved(g) {
		return 0, errIllegalGeneration
	}
	return g.fence, errNone
}

// staleCommit fences a generation whose commit the state machine refused
// as stale: its offsets were reset after the coordinator last looked.
func (c *coordinator) staleCommit(id string, generation int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[id]
	if c.closed || g == nil || g.generation != generation {
		return
	}
	if g.state == groupStable || g.state == groupCompletingRebalance {
		c.fenceGeneration(g)
	}
}
