package kafka

import (
	"context"
	"errors"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/queue"
)

// errNoRoom ends a claim the answer budget had no room for.
var errNoRoom = errors.New("kafka: no room in the answer budget")

// shareFetch answers ShareFetch (versions 1 and 2): it checks and
// advances the member's share session, applies the acknowledgements it
// carries, then claims records of the session's partitions from the
// queue groups under a lease of the lock duration, for the member. Each
// record comes with its delivery count in the acquired ranges; records
// are sent as batches of consecutive offsets. The answer is charged to
// the answer budget (Options.Answers) before records are claimed.
func (s *Server) shareFetch(ctx context.Context, rc *reqCtx, req *kmsg.ShareFetchRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	fail := refuser(rc, resp, &resp.ErrorCode, &resp.ErrorMessage)
	groupName, member, code, msg := s.shareCaller(rc, req.GroupID, req.MemberID)
	if code != errNone {
		return fail(code, msg)
	}
	topics, add, acks, code := s.shareTopics(rc, req.Topics, fetchAckBatches)
	if code != errNone {
		return fail(code, "")
	}
	if !s.share.lead(ctx) {
		_, wait := s.fetchBounds(req.MaxBytes, req.MaxWaitMillis)
		if fwd, ok := s.forwardShare(ctx, rc, req, wait); ok {
			rc.note(fwd.(*kmsg.ShareFetchResponse).ErrorCode)
			return fwd
		}
		return fail(errNotLeaderOrFollower, "")
	}
	resp.AcquisitionLockTimeoutMillis = int32(min(s.share.lockFor(groupName).Milliseconds(), math.MaxInt32))
	renew := req.Version >= 2 && req.IsRenewAck
	if req.ShareSessionEpoch == 0 && len(acks) > 0 {
		return fail(errInvalidRequest, "acknowledgements cannot open a share session")
	}
	step, r, code, msg := s.share.useSession(rc.c, groupName, member, req.ShareSessionEpoch, true)
	s.share.giveBack(groupName, r, "released: share session replaced")
	if code != errNone {
		return fail(code, msg)
	}
	var forget []sharePart
	for _, f := range req.ForgottenTopicsData {
		t, ok := s.topicByID(f.TopicID)
		if !ok {
			continue
		}
		for _, p := range f.Partitions {
			forget = append(forget, sharePart{t.Name, p})
		}
	}
	parts, ok := s.share.sessionParts(rc.c, groupName, member, add, forget)
	if !ok {
		return fail(errShareSessionNotFound, "")
	}
	ackCodes := s.share.acknowledge(ctx, groupName, member, acks, renew)

	out := map[sharePart]*kmsg.ShareFetchResponseTopicPartition{}
	answer := func(p sharePart) *kmsg.ShareFetchResponseTopicPartition {
		if rp := out[p]; rp != nil {
			return rp
		}
		rp := kmsg.NewShareFetchResponseTopicPartition()
		rp.Partition = p.partition
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
		out[p] = &rp
		return &rp
	}
	for p, code := range ackCodes {
		answer(p).AcknowledgeErrorCode = code
		rc.note(code)
	}
	for _, p := range add {
		answer(p)
	}
	if step == sessionClose {
		s.share.giveBack(groupName, s.share.closeSession(rc.c, groupName, member), "released: share session closed")
	} else if !renew {
		throttle, until := s.shareClaim(ctx, rc, req, groupName, member, parts, answer)
		resp.ThrottleMillis = throttle
		if until > 0 {
			// What is left of the soonest lock: a client's deadline,
			// its receipt of the answer plus this, is then the lease's
			// own, whatever lease the queue group has.
			left := max(time.Duration(until-time.Now().UnixNano()), 0)
			resp.AcquisitionLockTimeoutMillis = int32(min(left.Milliseconds(), math.MaxInt32))
		}
	}
	byTopic(s, topics, out, func(p sharePart, rp *kmsg.ShareFetchResponseTopicPartition, first bool, id [16]byte) {
		if first {
			rt := kmsg.NewShareFetchResponseTopic()
			rt.TopicID = id
			resp.Topics = append(resp.Topics, rt)
		}
		rt := &resp.Topics[len(resp.Topics)-1]
		rt.Partitions = append(rt.Partitions, *rp)
	})
	return resp
}

// sortParts sorts partitions by topic, then partition.
func sortParts(ps []sharePart) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].topic != ps[j].topic {
			return ps[i].topic < ps[j].topic
		}
		return ps[i].partition < ps[j].partition
	})
}

// byTopic calls add for each partition of m in order, saying whether it
// is its topic's first and giving the topic's id (from topics, else the
// backend), to build an answer's topics.
func byTopic[V any](s *Server, topics map[string]backend.TopicInfo, m map[sharePart]V, add func(p sharePart, v V, first bool, id [16]byte)) {
	keys := make([]sharePart, 0, len(m))
	for p := range m {
		keys = append(keys, p)
	}
	sortParts(keys)
	for i, p := range keys {
		info, ok := topics[p.topic]
		if !ok {
			info, _ = s.b.Topic(p.topic)
		}
		add(p, m[p], i == 0 || keys[i-1].topic != p.topic, topicID(info))
	}
}

// shareTopics resolves a request's topics by id: the partitions it names
// and their acknowledgements. An unknown topic id or one the principal
// may not read fails the request (UNKNOWN_TOPIC_ID,
// TOPIC_AUTHORIZATION_FAILED).
func (s *Server) shareTopics(rc *reqCtx, reqTopics []kmsg.ShareFetchRequestTopic, batches func(kmsg.ShareFetchRequestTopicPartition) []ackBatch) (map[string]backend.TopicInfo, []sharePart, []partAcks, int16) {
	topics := map[string]backend.TopicInfo{}
	var parts []sharePart
	var acks []partAcks
	for _, t := range reqTopics {
		info, ok := s.topicByID(t.TopicID)
		if !ok {
			return nil, nil, nil, errUnknownTopicID
		}
		if !rc.mayTopic(info.Name) {
			return nil, nil, nil, errTopicAuthorizationFailed
		}
		topics[info.Name] = info
		for _, p := range t.Partitions {
			if p.Partition < 0 || p.Partition >= info.Partitions {
				return nil, nil, nil, errUnknownTopicOrPartition
			}
			sp := sharePart{info.Name, p.Partition}
			parts = append(parts, sp)
			if b := batches(p); len(b) > 0 {
				acks = append(acks, partAcks{part: sp, batches: b})
			}
		}
	}
	return topics, parts, acks, errNone
}

// shareClaim claims records of parts for a member and puts them in the
// answer; it returns the throttle of an answer the budget had no room
// for, and the soonest lease deadline of the records answered (Unix ns, 0
// for none). The records are leased for their queue group's lease, which
// is replicated: share.record.lock.duration.ms is written there, so a new
// leader keeps the lock its predecessor was told. With several topics,
// each topic's claim may wait its share of MaxWait, in turn.
func (s *Server) shareClaim(ctx context.Context, rc *reqCtx, req *kmsg.ShareFetchRequest, groupName, member string, parts []sharePart, answer func(sharePart) *kmsg.ShareFetchResponseTopicPartition) (throttle int32, until int64) {
	var topics []string
	for _, p := range parts {
		if !slices.Contains(topics, p.topic) {
			topics = append(topics, p.topic)
		}
	}
	if len(topics) == 0 {
		return 0, 0
	}
	slices.Sort(topics)
	maxRecords := int(req.MaxRecords)
	if maxRecords <= 0 {
		maxRecords = 500
	}
	maxRecords = min(maxRecords, maxShareRecords)
	maxBytes, wait := s.fetchBounds(req.MaxBytes, req.MaxWaitMillis)
	per := wait / time.Duration(len(topics))
	var used int64
	got := 0
	for _, t := range topics {
		if got >= maxRecords || used >= maxBytes {
			break
		}
		w := per
		if got > 0 {
			w = 0 // something to answer already
		}
		// The claim may admit again at each wake of its wait: one
		// charge serves them all.
		charged := false
		admit := func(ctx context.Context) error {
			if charged {
				return nil
			}
			if _, ok := s.chargeAnswer(ctx, rc, maxBytes-used); !ok {
				return errNoRoom
			}
			charged = true
			return nil
		}
		res, err := s.claimOut(ctx, backend.QueueClaim{
			Topic: t, Group: groupName, Max: int32(maxRecords - got), MaxBytes: int32(min(maxBytes-used, math.MaxInt32)),
			Worker: shareWorker(member),
		}, parts, w, admit)
		switch {
		case errors.Is(err, errNoRoom):
			return int32(min(s.answerWait.Milliseconds(), math.MaxInt32)), 0
		case err != nil:
			code := groupCode(err)
			for _, p := range parts {
				if p.topic == t {
					answer(p).ErrorCode = code
				}
			}
			rc.note(code)
			continue
		}
		s.share.giveBack(groupName, s.share.hold(rc.c, groupName, member, t, res.Records), "released: claimed for a partition outside the share session")
		n := s.putRecords(t, res.Records, parts, answer)
		for _, r := range res.Records {
			if slices.Contains(parts, sharePart{t, r.Partition}) && (until == 0 || r.LeaseUntil < until) {
				until = r.LeaseUntil
			}
		}
		used += n
		got += len(res.Records)
	}
	// The charges reserved the most the answer could reach: keep what it
	// holds.
	left := used
	for _, c := range rc.answers {
		keep := min(left, c.Bytes())
		c.Trim(keep)
		left -= keep
	}
	return 0, until
}

// claimOutSlack bounds how long a claim may take past its wait.
const claimOutSlack = 10 * time.Second

// claimOut is claimParts carried through when the client goes away (ctx
// ends): a claim cut off while it was proposed may still commit, and its
// records, unknown to the session, would stay leased to the member until
// their lock ends. Carried through, they are held by the session and
// released with it when the connection's close ends it. It ends with the
// server.
func (s *Server) claimOut(ctx context.Context, c backend.QueueClaim, parts []sharePart, wait time.Duration, admit func(context.Context) error) (backend.QueueClaimResult, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait+claimOutSlack)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	return s.claimParts(cctx, c, parts, wait, admit)
}

// partsClaimer is the part of the backend that claims from the data
// groups holding some partitions of a placed topic only
// (replication.Backend): a share session fetches the partitions one node
// leads, and a record of another partition it claimed would be released,
// a delivery spent.
type partsClaimer interface {
	QueueClaimWaitParts(ctx context.Context, c backend.QueueClaim, parts []int32, wait time.Duration, admit func(context.Context) error) (backend.QueueClaimResult, error)
}

// claimParts claims for a session whose partitions are parts, from the
// data groups that hold those of c's topic where the backend can.
func (s *Server) claimParts(ctx context.Context, c backend.QueueClaim, parts []sharePart, wait time.Duration, admit func(context.Context) error) (backend.QueueClaimResult, error) {
	pc, ok := s.b.(partsClaimer)
	if !ok {
		return s.b.QueueClaimWait(ctx, c, wait, admit)
	}
	var ps []int32
	for _, p := range parts {
		if p.topic == c.Topic {
			ps = append(ps, p.partition)
		}
	}
	return pc.QueueClaimWaitParts(ctx, c, ps, wait, admit)
}

// shareWorker is the worker name a member's claims carry, which `logctl
// queue describe` shows.
func shareWorker(member string) string {
	w := "kafka-share:" + member
	if len(w) > queue.MaxWorkerLen {
		w = w[:queue.MaxWorkerLen]
	}
	return w
}

// putRecords adds one topic's claimed records to the answer: per
// partition, batches of consecutive offsets and the acquired ranges (a
// range per run of consecutive offsets with one delivery count). It
// returns the bytes added.
func (s *Server) putRecords(topic string, recs []backend.ClaimedRecord, parts []sharePart, answer func(sharePart) *kmsg.ShareFetchResponseTopicPartition) int64 {
	byPart := map[int32][]backend.ClaimedRecord{}
	for _, r := range recs {
		if slices.Contains(parts, sharePart{topic, r.Partition}) {
			byPart[r.Partition] = append(byPart[r.Partition], r)
		}
	}
	var n int64
	for p, rs := range byPart {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Offset < rs[j].Offset })
		rp := answer(sharePart{topic, p})
		for i := 0; i < len(rs); {
			j := i + 1
			for j < len(rs) && rs[j].Offset == rs[j-1].Offset+1 {
				j++
			}
			run := make([]batch.Record, 0, j-i)
			for _, r := range rs[i:j] {
				run = append(run, r.Record)
			}
			b, err := batch.Build(run)
			if err != nil {
				s.logger.Warn("kafka: share fetch could not encode records", "topic", topic, "partition", p, "err", err)
				i = j
				continue
			}
			batch.SetBaseOffset(b, rs[i].Offset)
			rp.Records = append(rp.Records, b...)
			n += int64(len(b))
			for k := i; k < j; {
				l := k + 1
				for l < j && rs[l].Deliveries == rs[k].Deliveries {
					l++
				}
				a := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
				a.FirstOffset, a.LastOffset = rs[k].Offset, rs[l-1].Offset
				a.DeliveryCount = int16(min(rs[k].Deliveries, math.MaxInt16))
				rp.AcquiredRecords = append(rp.AcquiredRecords, a)
				k = l
			}
			i = j
		}
	}
	return n
}
