package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
)

// offsetDelete answers OffsetDelete (version 0), on the coordinator: the
// committed offsets of the partitions named are removed, in one Raft
// entry, except for topics a member of the group subscribes to
// (GROUP_SUBSCRIBED_TO_TOPIC). A group held by members of another protocol
// (logd's own, or a Kafka protocol type other than "consumer", whose
// subscriptions cannot be read) is NON_EMPTY_GROUP. The principal needs to
// delete in the group (GROUP_AUTHORIZATION_FAILED) and to read each topic
// (TOPIC_AUTHORIZATION_FAILED); the request has a line in the audit log.
func (s *Server) offsetDelete(ctx context.Context, rc *reqCtx, req *kmsg.OffsetDeleteRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	var msg string
	defer func() {
		rc.note(resp.ErrorCode)
		code := resp.ErrorCode
		var parts []string
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				rc.note(p.ErrorCode)
				parts = append(parts, fmt.Sprintf("%s:%d", t.Topic, p.Partition))
				if code == errNone {
					code = p.ErrorCode
				}
			}
		}
		rc.audit([]slog.Attr{slog.String("group", req.Group), slog.String("partitions", strings.Join(parts, ","))}, code, msg)
	}()
	if group.ValidateName("group", req.Group) != nil {
		resp.ErrorCode = errInvalidGroupID
		return resp
	}
	if !rc.mayGroup(req.Group) {
		resp.ErrorCode = errGroupAuthorizationFailed
		return resp
	}
	if !s.groups.lead(ctx, req.Group, false) {
		resp.ErrorCode = errNotCoordinator
		return resp
	}
	g, err := s.b.ConsumerGroup(req.Group)
	if err != nil {
		resp.ErrorCode = groupCode(err)
		return resp
	}
	if _, live := g.Fence(s.groups.now().UnixNano()); live > 0 {
		resp.ErrorCode = errNonEmptyGroup
		return resp
	}
	subscribed, readable := s.groups.subscriptions(req.Group)
	if !readable {
		resp.ErrorCode = errNonEmptyGroup
		return resp
	}
	var offsets []group.OffsetCommit
	var sent []*kmsg.OffsetDeleteResponseTopicPartition
	for i, t := range req.Topics {
		info, err := s.b.Topic(t.Topic)
		for j, p := range t.Partitions {
			rp := &resp.Topics[i].Partitions[j]
			switch {
			case !rc.mayTopic(t.Topic):
				rp.ErrorCode = errTopicAuthorizationFailed
			case subscribed[t.Topic]:
				rp.ErrorCode = errGroupSubscribedToTopic
			case err != nil || p.Partition < 0 || p.Partition >= info.Partitions:
				rp.ErrorCode = errUnknownTopicOrPartition
			default:
				offsets = append(offsets, group.OffsetCommit{TopicPartition: group.TopicPartition{Topic: t.Topic, Partition: p.Partition}, Offset: group.DeleteOffset})
				sent = append(sent, rp)
			}
		}
	}
	if len(offsets) == 0 {
		return resp
	}
	err = s.b.SetGroupOffsets(ctx, backend.GroupSetOffsets{Group: req.Group, Fence: group.NoFence, Offsets: offsets})
	code := groupCode(err)
	if err != nil {
		msg = errorMessage(err)
	}
	if errors.Is(err, group.ErrUnknownMember) {
		code = errNonEmptyGroup // members of logd's protocol came meanwhile
	}
	for _, rp := range sent {
		rp.ErrorCode = code
	}
	return resp
}

// subscriptions returns the topics the members of a Kafka group subscribe
// to, read from their "consumer" protocol metadata; readable is false
// when a member's protocol type is another, or its metadata does not
// parse.
func (c *coordinator) subscriptions(id string) (topics map[string]bool, readable bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	topics = map[string]bool{}
	g := c.groups[id]
	if g == nil || len(g.members) == 0 {
		return topics, true
	}
	if g.protocolType != "consumer" {
		return nil, false
	}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if g.protocol != "" && p.Name != g.protocol {
				continue
			}
			var md kmsg.ConsumerMemberMetadata
			if err := md.ReadFrom(p.Metadata); err != nil {
				return nil, false
			}
			for _, t := range md.Topics {
				topics[t] = true
			}
		}
	}
	return topics, true
}
