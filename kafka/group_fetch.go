package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/group"
)

// offsetFetch answers OffsetFetch (versions 1 to 9, several groups at
// once from version 8): the group's committed offsets, logd's own, so an
// offset committed or reset through logd's API is what a Kafka member
// starts from. A partition without one, or a group that does not exist,
// has offset -1. Null topics (version 2 and later) ask for every
// partition with an offset. Leader epochs are -1 and metadata empty. The
// principal needs to describe the group (GROUP_AUTHORIZATION_FAILED) and
// each topic (TOPIC_AUTHORIZATION_FAILED; left out of every partition's
// answer).
func (s *Server) offsetFetch(ctx context.Context, rc *reqCtx, req *kmsg.OffsetFetchRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			var topics []fetchTopic
			if rg.Topics != nil {
				topics = make([]fetchTopic, 0, len(rg.Topics))
				for _, t := range rg.Topics {
					topics = append(topics, fetchTopic{t.Topic, t.Partitions})
				}
			}
			code, offs := s.groupOffsets(ctx, rc, rg.Group, topics)
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group, g.ErrorCode = rg.Group, code
			rc.note(code)
			for _, t := range offs {
				gt := kmsg.NewOffsetFetchResponseGroupTopic()
				gt.Topic = t.topic
				for _, p := range t.partitions {
					gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					gp.Partition, gp.Offset, gp.Metadata, gp.ErrorCode = p.partition, p.offset, kmsg.StringPtr(""), p.code
					rc.note(p.code)
					gt.Partitions = append(gt.Partitions, gp)
				}
				g.Topics = append(g.Topics, gt)
			}
			resp.Groups = append(resp.Groups, g)
		}
		return resp
	}
	var topics []fetchTopic
	if req.Topics != nil || req.Version < 2 {
		topics = make([]fetchTopic, 0, len(req.Topics))
		for _, t := range req.Topics {
			topics = append(topics, fetchTopic{t.Topic, t.Partitions})
		}
	}
	code, offs := s.groupOffsets(ctx, rc, req.Group, topics)
	if req.Version >= 2 {
		resp.ErrorCode = code
		rc.note(code)
	}
	for _, t := range offs {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.topic
		for _, p := range t.partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.Metadata, rp.ErrorCode = p.partition, p.offset, kmsg.StringPtr(""), p.code
			if req.Version < 2 && code != errNone {
				rp.ErrorCode = code // version 1 has no group-level code
			}
			rc.note(rp.ErrorCode)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// fetchTopic is one topic an OffsetFetch asks for.
type fetchTopic struct {
	topic      string
	partitions []int32
}

// topicOffsets are one topic's answer.
type topicOffsets struct {
	topic      string
	partitions []partitionOffset
}

type partitionOffset struct {
	partition int32
	offset    int64
	code      int16
}

// groupOffsets reads a group's committed offsets for topics (nil: every
// partition with one). A group-level error comes back with the partitions
// asked, each at -1.
func (s *Server) groupOffsets(ctx context.Context, rc *reqCtx, name string, topics []fetchTopic) (int16, []topicOffsets) {
	code := errNone
	switch {
	case group.ValidateName("group", name) != nil:
		code = errInvalidGroupID
	case !rc.mayGroup(name):
		code = errGroupAuthorizationFailed
	case !s.groups.lead(ctx, name, false):
		code = errNotCoordinator
	}
	var g *group.ConsumerGroup
	if code == errNone {
		var err error
		if g, err = s.b.ConsumerGroup(name); err != nil && !errors.Is(err, group.ErrConsumerGroupNotFound) {
			code = groupCode(err)
		}
	}
	committed := func(topic string, p int32) int64 {
		if g == nil {
			return -1
		}
		t, ok := g.Topics[topic]
		if !ok || p < 0 || int(p) >= len(t.Partitions) {
			return -1
		}
		return t.Partitions[p].Committed
	}
	if topics == nil {
		if g == nil || code != errNone {
			return code, nil
		}
		var out []topicOffsets
		for _, name := range g.TopicNames() {
			if !rc.mayTopic(name) {
				continue // as Kafka: left out, not refused
			}
			to := topicOffsets{topic: name}
			for p, cp := range g.Topics[name].Partitions {
				if cp.Committed >= 0 {
					to.partitions = append(to.partitions, partitionOffset{partition: int32(p), offset: cp.Committed})
				}
			}
			if len(to.partitions) > 0 {
				out = append(out, to)
			}
		}
		return code, out
	}
	out := make([]topicOffsets, 0, len(topics))
	for _, t := range topics {
		to := topicOffsets{topic: t.topic, partitions: make([]partitionOffset, 0, len(t.partitions))}
		may := code != errNone || rc.mayTopic(t.topic)
		for _, p := range t.partitions {
			po := partitionOffset{partition: p, offset: -1, code: errTopicAuthorizationFailed}
			if may {
				po = partitionOffset{partition: p, offset: committed(t.topic, p)}
			}
			to.partitions = append(to.partitions, po)
		}
		out = append(out, to)
	}
	return code, out
}
