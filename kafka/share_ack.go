package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareAcknowledge answers ShareAcknowledge (versions 1 and 2): the
// acknowledgements of records a member holds, in its share session (it
// cannot open one; -1 closes it after applying them). RENEW (type 4)
// needs version 2 and IsRenewAck.
func (s *Server) shareAcknowledge(ctx context.Context, rc *reqCtx, req *kmsg.ShareAcknowledgeRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	fail := refuser(rc, resp, &resp.ErrorCode, &resp.ErrorMessage)
	groupName, member, code, msg := s.shareCaller(rc, req.GroupID, req.MemberID)
	if code != errNone {
		return fail(code, msg)
	}
	// The same shape as ShareFetch's topics, to resolve them alike.
	asFetch := make([]kmsg.ShareFetchRequestTopic, 0, len(req.Topics))
	for _, t := range req.Topics {
		ft := kmsg.NewShareFetchRequestTopic()
		ft.TopicID = t.TopicID
		for _, p := range t.Partitions {
			fp := kmsg.NewShareFetchRequestTopicPartition()
			fp.Partition = p.Partition
			for _, b := range p.AcknowledgementBatches {
				fp.AcknowledgementBatches = append(fp.AcknowledgementBatches, kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{
					FirstOffset: b.FirstOffset, LastOffset: b.LastOffset, AcknowledgeTypes: b.AcknowledgeTypes,
				})
			}
			ft.Partitions = append(ft.Partitions, fp)
		}
		asFetch = append(asFetch, ft)
	}
	topics, _, acks, code := s.shareTopics(rc, asFetch, fetchAckBatches)
	if code != errNone {
		return fail(code, "")
	}
	if !s.share.lead(ctx) {
		if fwd, ok := s.forwardShare(ctx, rc, req, 0); ok {
			rc.note(fwd.(*kmsg.ShareAcknowledgeResponse).ErrorCode)
			return fwd
		}
		return fail(errNotLeaderOrFollower, "")
	}
	step, _, code, msg := s.share.useSession(rc.c, groupName, member, req.ShareSessionEpoch, false)
	if code != errNone {
		return fail(code, msg)
	}
	codes := s.share.acknowledge(ctx, groupName, member, acks, req.Version >= 2 && req.IsRenewAck)
	if step == sessionClose {
		s.share.giveBack(groupName, s.share.closeSession(rc.c, groupName, member), "released: share session closed")
	}
	byTopic(s, topics, codes, func(p sharePart, code int16, first bool, id [16]byte) {
		if first {
			rt := kmsg.NewShareAcknowledgeResponseTopic()
			rt.TopicID = id
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p.partition, code
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
		rc.note(code)
		rt := &resp.Topics[len(resp.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	})
	return resp
}

// fetchAckBatches is a ShareFetch partition's acknowledgement batches.
func fetchAckBatches(p kmsg.ShareFetchRequestTopicPartition) []ackBatch {
	out := make([]ackBatch, 0, len(p.AcknowledgementBatches))
	for _, b := range p.AcknowledgementBatches {
		out = append(out, ackBatch{first: b.FirstOffset, last: b.LastOffset, types: b.AcknowledgeTypes})
	}
	return out
}
