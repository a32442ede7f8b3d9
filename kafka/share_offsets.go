package kafka

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/group"
)

// keyDescribeShareGroupOffsets is DescribeShareGroupOffsets' key.
const keyDescribeShareGroupOffsets int16 = 90

// describeShareGroupOffsets answers DescribeShareGroupOffsets (versions 0
// and 1): per partition of the topics asked (every topic with a queue
// group of the group's name when none is), the share-partition start
// offset, which is the queue group's: every offset below it is finished;
// from version 1 the lag, the records of the partition not yet finished
// (waiting, in flight, in backoff, or decided for the dead-letter
// topic). A topic without the group's queue group is answered without
// partitions, as Kafka answers a topic the group never consumed.
func (s *Server) describeShareGroupOffsets(ctx context.Context, rc *reqCtx, req *kmsg.DescribeShareGroupOffsetsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	lead := s.share.lead(ctx)
	now := time.Now().UnixNano()
	for _, rg := range req.Groups {
		g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		g.GroupID = rg.GroupID
		switch {
		case group.ValidateName("group", rg.GroupID) != nil:
			g.ErrorCode = errInvalidGroupID
		case !rc.mayGroup(rg.GroupID):
			g.ErrorCode = errGroupAuthorizationFailed
		case !lead:
			g.ErrorCode = errNotCoordinator
		}
		rc.note(g.ErrorCode)
		if g.ErrorCode != errNone {
			resp.Groups = append(resp.Groups, g)
			continue
		}
		topics := rg.Topics
		if topics == nil {
			for _, t := range s.b.Topics() {
				if slices.Contains(s.b.QueueGroups(t.Name), rg.GroupID) {
					topics = append(topics, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: t.Name})
				}
			}
		}
		for _, rt := range topics {
			if !rc.mayTopic(rt.Topic) {
				continue
			}
			info, err := s.b.Topic(rt.Topic)
			if err != nil {
				continue
			}
			t := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			t.Topic, t.TopicID = rt.Topic, topicID(info)
			qi, err := s.b.DescribeQueueGroup(rt.Topic, rg.GroupID, now)
			if err == nil {
				for _, p := range qi.Partitions {
					if rt.Partitions != nil && !slices.Contains(rt.Partitions, p.Partition) {
						continue
					}
					rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
					rp.Partition, rp.StartOffset, rp.LeaderEpoch = p.Partition, p.Start, -1
					rp.Lag = p.Ready + p.InFlight + p.Delayed + p.DeadPending
					t.Partitions = append(t.Partitions, rp)
				}
			}
			g.Topics = append(g.Topics, t)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}
