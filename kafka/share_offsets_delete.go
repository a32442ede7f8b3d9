package kafka

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// keyDeleteShareGroupOffsets is DeleteShareGroupOffsets' key.
const keyDeleteShareGroupOffsets int16 = 92

// deleteShareGroupOffsets answers DeleteShareGroupOffsets (version 0): the
// share group's state on each topic, its queue group there, is deleted
// (its leases, backlog and counts; the dead-letter topic stays), so a
// later heartbeat naming the topic creates it anew by
// share.auto.offset.reset. As in Kafka, a group unknown here (no member,
// no queue group of its name) is GROUP_ID_NOT_FOUND and a group with
// members NON_EMPTY_GROUP; beyond Kafka, a queue group with a record in
// flight (a worker of logd's API holds one) is not empty either. A topic
// that does not exist is UNKNOWN_TOPIC_OR_PARTITION; one the group holds
// no state on has nothing to delete. Until every member's build applies
// the delete the key is not advertised, and a request that comes anyway
// is UNSUPPORTED_VERSION.
func (s *Server) deleteShareGroupOffsets(ctx context.Context, rc *reqCtx, req *kmsg.DeleteShareGroupOffsetsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	fail := refuser(rc, resp, &resp.ErrorCode, &resp.ErrorMessage)
	if code, msg := s.shareOffsetsRefusal(ctx, rc, req.GroupID, "DeleteShareGroupOffsets"); code != errNone {
		return fail(code, msg)
	}
	members := s.share.memberCount(req.GroupID)
	switch {
	case members < 0 && !s.hasQueueGroups(req.GroupID):
		return fail(errGroupIDNotFound, "")
	case members > 0:
		return fail(errNonEmptyGroup, "the share group has members")
	}
	for _, rt := range req.Topics {
		t := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		t.Topic = rt.Topic
		info, err := s.b.Topic(rt.Topic)
		switch {
		case !rc.mayTopic(rt.Topic):
			t.ErrorCode = errTopicAuthorizationFailed
		case err != nil:
			t.ErrorCode = errUnknownTopicOrPartition
		default:
			t.TopicID = topicID(info)
			if !slices.Contains(s.b.QueueGroups(rt.Topic), req.GroupID) {
				break
			}
			if err := s.b.DeleteQueueGroup(ctx, rt.Topic, req.GroupID); err != nil {
				t.ErrorCode = groupCode(err)
				msg := errorMessage(err)
				t.ErrorMessage = &msg
			}
		}
		rc.note(t.ErrorCode)
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
