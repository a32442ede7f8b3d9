package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/queue"
)

// keyAlterShareGroupOffsets is AlterShareGroupOffsets' key.
const keyAlterShareGroupOffsets int16 = 91

// alterShareGroupOffsets answers AlterShareGroupOffsets (version 0): each
// partition's share-partition start offset becomes the queue group's
// start (queue.Group.SetStarts): records below it count as finished, from
// it on as never delivered. As in Kafka, the group must be empty
// (NON_EMPTY_GROUP while it has members here), and a group or topic the
// group never consumed is created, as the first heartbeat naming the
// topic would create it; beyond Kafka, a queue group with a record in
// flight (a worker of logd's API holds one) is not empty either. Per
// partition: a partition the topic lacks is UNKNOWN_TOPIC_OR_PARTITION, a
// negative start INVALID_REQUEST, a start past the partition's end
// OFFSET_OUT_OF_RANGE; a start below the log start (records retention
// removed) is the log start. The partitions of a topic move in one command.
// Until every member's build applies that command the key is not
// advertised, and a request that comes anyway is UNSUPPORTED_VERSION.
func (s *Server) alterShareGroupOffsets(ctx context.Context, rc *reqCtx, req *kmsg.AlterShareGroupOffsetsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	fail := refuser(rc, resp, &resp.ErrorCode, &resp.ErrorMessage)
	if code, msg := s.shareOffsetsRefusal(ctx, rc, req.GroupID, "AlterShareGroupOffsets"); code != errNone {
		return fail(code, msg)
	}
	if s.share.memberCount(req.GroupID) > 0 {
		return fail(errNonEmptyGroup, "the share group has members")
	}
	for _, rt := range req.Topics {
		t := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		t.Topic = rt.Topic
		answer := func(p int32, code int16, msg string) {
			rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			if msg != "" {
				rp.ErrorMessage = &msg
			}
			rc.note(code)
			t.Partitions = append(t.Partitions, rp)
		}
		info, err := s.b.Topic(rt.Topic)
		if !rc.mayTopic(rt.Topic) || err != nil {
			code := errTopicAuthorizationFailed
			if rc.mayTopic(rt.Topic) {
				code = errUnknownTopicOrPartition
			}
			for _, rp := range rt.Partitions {
				answer(rp.Partition, code, "")
			}
			resp.Topics = append(resp.Topics, t)
			continue
		}
		t.TopicID = topicID(info)
		var starts []queue.PartitionStart
		for _, rp := range rt.Partitions {
			switch {
			case rp.Partition < 0 || rp.Partition >= info.Partitions:
				answer(rp.Partition, errUnknownTopicOrPartition, "")
			case rp.StartOffset < 0:
				answer(rp.Partition, errInvalidRequest, "a start offset of 0 or more is required")
			default:
				o, err := s.b.Offsets(rt.Topic, rp.Partition)
				if err != nil || rp.StartOffset > o.End {
					code, msg := errOffsetOutOfRange, "the start offset is past the partition's end"
					if err != nil {
						code, msg = codeFor(err, opAdmin), errorMessage(err)
					}
					answer(rp.Partition, code, msg)
					continue
				}
				// Below the log start there are no records to work: the
				// queue group starts where they do.
				starts = append(starts, queue.PartitionStart{Partition: rp.Partition, Offset: max(rp.StartOffset, o.LogStart)})
			}
		}
		if len(starts) > 0 {
			err := s.share.ensureQueueGroups(ctx, req.GroupID, []string{rt.Topic})
			if err == nil {
				err = s.b.SetQueueStarts(ctx, rt.Topic, req.GroupID, starts)
			}
			code, msg := groupCode(err), ""
			if err != nil {
				msg = errorMessage(err)
			}
			for _, st := range starts {
				answer(st.Partition, code, msg)
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// shareOffsetsRefusal is the refusal every share-offsets change of group
// starts with (errNone for none): an invalid or unauthorized group, a
// node that does not coordinate, a cluster below the level of api.
func (s *Server) shareOffsetsRefusal(ctx context.Context, rc *reqCtx, groupID, api string) (int16, string) {
	switch {
	case group.ValidateName("group", groupID) != nil:
		return errInvalidGroupID, ""
	case !rc.mayGroup(groupID):
		return errGroupAuthorizationFailed, ""
	case !s.share.lead(ctx):
		return errNotCoordinator, ""
	case s.b.CheckQueueStarts() != nil:
		return errUnsupportedVersion, "not every node of the cluster serves " + api + " yet"
	}
	return errNone, ""
}
