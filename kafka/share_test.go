package kafka

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/queue"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/replicationtest"
)

// shareHeartbeat sends a ShareGroupHeartbeat v1.
func (c *rawClient) shareHeartbeat(groupID, member string, epoch int32, topics ...string) *kmsg.ShareGroupHeartbeatResponse {
	c.t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.SetVersion(1)
	req.GroupID, req.MemberID, req.MemberEpoch = groupID, member, epoch
	if topics != nil {
		req.SubscribedTopicNames = topics
	}
	return c.do(req).(*kmsg.ShareGroupHeartbeatResponse)
}

// shareAck is one acknowledgement batch for shareFetch and shareAcknowledge.
type shareAck struct {
	partition   int32
	first, last int64
	types       []int8
}

// shareFetch sends a ShareFetch of every partition of topic (at epoch 0,
// or when open is set) with acks.
func (c *rawClient) shareFetch(version int16, tn *testNode, groupID, member string, epoch int32, topic string, open bool, wait time.Duration, acks ...shareAck) *kmsg.ShareFetchResponse {
	c.t.Helper()
	info, err := tn.backend.Topic(topic)
	if err != nil {
		c.t.Fatal(err)
	}
	req := kmsg.NewPtrShareFetchRequest()
	req.SetVersion(version)
	req.GroupID, req.MemberID = kmsg.StringPtr(groupID), kmsg.StringPtr(member)
	req.ShareSessionEpoch = epoch
	req.MaxWaitMillis = int32(wait.Milliseconds())
	req.MaxBytes, req.MaxRecords, req.BatchSize = 1<<20, 500, 500
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = topicID(info)
	for p := range info.Partitions {
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = p, 1<<20
		for _, a := range acks {
			if a.partition == p {
				rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: a.first, LastOffset: a.last, AcknowledgeTypes: a.types})
			}
		}
		if open || epoch == 0 || len(rp.AcknowledgementBatches) > 0 {
			rt.Partitions = append(rt.Partitions, rp)
		}
	}
	if len(rt.Partitions) > 0 {
		req.Topics = append(req.Topics, rt)
	}
	return c.do(req).(*kmsg.ShareFetchResponse)
}

// shareAcknowledge sends a ShareAcknowledge.
func (c *rawClient) shareAcknowledge(version int16, tn *testNode, groupID, member string, epoch int32, topic string, renew bool, acks ...shareAck) *kmsg.ShareAcknowledgeResponse {
	c.t.Helper()
	info, err := tn.backend.Topic(topic)
	if err != nil {
		c.t.Fatal(err)
	}
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.SetVersion(version)
	req.GroupID, req.MemberID = kmsg.StringPtr(groupID), kmsg.StringPtr(member)
	req.ShareSessionEpoch, req.IsRenewAck = epoch, renew
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = topicID(info)
	for _, a := range acks {
		rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
		rp.Partition = a.partition
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{FirstOffset: a.first, LastOffset: a.last, AcknowledgeTypes: a.types})
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return c.do(req).(*kmsg.ShareAcknowledgeResponse)
}

// acquired lists a ShareFetch answer's acquired offsets per partition with
// their delivery counts.
func acquired(resp *kmsg.ShareFetchResponse) map[int32]map[int64]int16 {
	out := map[int32]map[int64]int16{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			for _, a := range p.AcquiredRecords {
				for o := a.FirstOffset; o <= a.LastOffset; o++ {
					if out[p.Partition] == nil {
						out[p.Partition] = map[int64]int16{}
					}
					out[p.Partition][o] = a.DeliveryCount
				}
			}
		}
	}
	return out
}

// shareCodes lists a ShareFetch answer's partition codes: fetch and
// acknowledgement.
func shareCodes(resp *kmsg.ShareFetchResponse) (fetch, ack map[int32]int16) {
	fetch, ack = map[int32]int16{}, map[int32]int16{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			fetch[p.Partition], ack[p.Partition] = p.ErrorCode, p.AcknowledgeErrorCode
		}
	}
	return fetch, ack
}

// ackCodes lists a ShareAcknowledge answer's partition codes.
func ackCodes(resp *kmsg.ShareAcknowledgeResponse) map[int32]int16 {
	out := map[int32]int16{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p.ErrorCode
		}
	}
	return out
}

// shareSetup makes a topic of one partition with values, and its queue
// group groupID working it from the start.
func shareSetup(t *testing.T, tn *testNode, topic, groupID string, values int, cfg queue.Config) {
	t.Helper()
	tn.createTopic(topic, 1, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if cfg.Lease == 0 {
		// The lease a share heartbeat would give the queue group: the
		// node's lock, which share deliveries then get.
		cfg.Lease = tn.srv.share.opts.lockDuration
	}
	if _, err := tn.backend.CreateQueueGroup(ctx, backend.QueueCreate{Topic: topic, Group: groupID, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	if values > 0 {
		vs := make([]string, values)
		for i := range vs {
			vs[i] = "v"
		}
		c := dial(t, tn.addr)
		if code, _ := produceCode(t, c.do(produceReq(9, -1, topic, 0, records(t, vs...)))); code != 0 {
			t.Fatalf("produce: code %d", code)
		}
	}
}

// join makes member a member of the share group on topic and returns its
// epoch.
func (c *rawClient) join(groupID, member, topic string) int32 {
	c.t.Helper()
	resp := c.shareHeartbeat(groupID, member, 0, topic)
	if resp.ErrorCode != 0 || resp.MemberEpoch <= 0 || resp.Assignment == nil {
		c.t.Fatalf("join %s: code %d epoch %d assignment %v", member, resp.ErrorCode, resp.MemberEpoch, resp.Assignment)
	}
	return resp.MemberEpoch
}

func withShare(timeout, lock time.Duration, sessions int) func(*Options) {
	return func(o *Options) {
		o.Groups.ShareSessionTimeout, o.Groups.ShareLockDuration, o.Groups.MaxShareSessions = timeout, lock, sessions
		o.Groups.ShareHeartbeatInterval = 100 * time.Millisecond
	}
}

// TestShareGroupHeartbeatErrors: joining, heartbeating and leaving, and
// the codes of a member the group does not know, a stale member epoch and
// a join without a subscription.
func TestShareGroupHeartbeatErrors(t *testing.T) {
	tn := startNode(t)
	tn.createTopic("hb", 2, nil)
	c := dial(t, tn.addr)
	for _, tc := range []struct {
		name   string
		member string
		epoch  int32
		topics []string
		want   int16
	}{
		{name: "unknown member", member: "ghost", epoch: 3, want: errUnknownMemberID},
		{name: "join without topics", member: "m0", epoch: 0, want: errInvalidRequest},
		{name: "no member id", member: "", epoch: 0, topics: []string{"hb"}, want: errInvalidRequest},
		{name: "bad epoch", member: "m0", epoch: -2, topics: []string{"hb"}, want: errInvalidRequest},
	} {
		if got := c.shareHeartbeat("g", tc.member, tc.epoch, tc.topics...); got.ErrorCode != tc.want {
			t.Errorf("%s: code %d, want %d", tc.name, got.ErrorCode, tc.want)
		}
	}
	epoch := c.join("g", "m1", "hb")
	resp := c.shareHeartbeat("g", "m1", epoch)
	if resp.ErrorCode != 0 || resp.MemberEpoch != epoch || resp.Assignment != nil {
		t.Fatalf("heartbeat: code %d epoch %d (want %d) assignment %v (want none: unchanged)", resp.ErrorCode, resp.MemberEpoch, epoch, resp.Assignment)
	}
	if got := c.shareHeartbeat("g", "m1", epoch+1); got.ErrorCode != errFencedMemberEpoch {
		t.Fatalf("stale epoch: code %d, want FENCED_MEMBER_EPOCH", got.ErrorCode)
	}
	// Every member is assigned every partition.
	resp = c.shareHeartbeat("g", "m2", 0, "hb")
	if resp.ErrorCode != 0 || len(resp.Assignment.TopicPartitions) != 1 || len(resp.Assignment.TopicPartitions[0].Partitions) != 2 {
		t.Fatalf("second member: %+v", resp)
	}
	if got := c.shareHeartbeat("g", "m1", -1); got.ErrorCode != 0 || got.MemberEpoch != -1 {
		t.Fatalf("leave: code %d epoch %d", got.ErrorCode, got.MemberEpoch)
	}
	if got := c.shareHeartbeat("g", "m1", epoch); got.ErrorCode != errUnknownMemberID {
		t.Fatalf("after leaving: code %d, want UNKNOWN_MEMBER_ID", got.ErrorCode)
	}
	if !queueGroupExists(tn, "hb", "g") {
		t.Fatal("the first heartbeat did not create the queue group")
	}
}

func queueGroupExists(tn *testNode, topic, groupID string) bool {
	for _, g := range tn.backend.QueueGroups(topic) {
		if g == groupID {
			return true
		}
	}
	return false
}

// TestShareSessionErrors: the share session's epochs and bounds.
func TestShareSessionErrors(t *testing.T) {
	tn := startNode(t, withShare(time.Minute, time.Minute, 2))
	shareSetup(t, tn, "ss", "g", 4, queue.Config{})
	c := dial(t, tn.addr)
	c.join("g", "a", "ss")
	top := func(resp *kmsg.ShareFetchResponse) int16 { return resp.ErrorCode }
	if got := top(c.shareFetch(1, tn, "g", "nobody", 0, "ss", true, 0)); got != errUnknownMemberID {
		t.Errorf("unknown member: code %d", got)
	}
	if got := top(c.shareFetch(1, tn, "g", "a", 4, "ss", true, 0)); got != errShareSessionNotFound {
		t.Errorf("no session: code %d, want SHARE_SESSION_NOT_FOUND", got)
	}
	if got := top(c.shareFetch(1, tn, "g", "a", 0, "ss", true, 0, shareAck{0, 0, 0, []int8{1}})); got != errInvalidRequest {
		t.Errorf("acknowledgements opening a session: code %d, want INVALID_REQUEST", got)
	}
	if got := c.shareAcknowledge(1, tn, "g", "a", 0, "ss", false, shareAck{0, 0, 0, []int8{1}}).ErrorCode; got != errInvalidShareSessionEpoch {
		t.Errorf("ShareAcknowledge at epoch 0: code %d", got)
	}
	resp := c.shareFetch(1, tn, "g", "a", 0, "ss", true, 0)
	if resp.ErrorCode != 0 || len(acquired(resp)[0]) != 4 {
		t.Fatalf("open: code %d, acquired %v", resp.ErrorCode, acquired(resp))
	}
	if got := top(c.shareFetch(1, tn, "g", "a", 3, "ss", false, 0)); got != errInvalidShareSessionEpoch {
		t.Errorf("wrong epoch: code %d, want INVALID_SHARE_SESSION_EPOCH", got)
	}
	other := dial(t, tn.addr)
	if got := top(other.shareFetch(1, tn, "g", "a", 1, "ss", false, 0)); got != errShareSessionNotFound {
		t.Errorf("another connection: code %d, want SHARE_SESSION_NOT_FOUND", got)
	}
	if got := top(c.shareFetch(1, tn, "g", "a", 1, "ss", false, 0)); got != 0 {
		t.Errorf("next epoch: code %d", got)
	}
	// The limit: two sessions.
	other.join("g", "b", "ss")
	if got := top(other.shareFetch(1, tn, "g", "b", 0, "ss", true, 0)); got != 0 {
		t.Errorf("second session: code %d", got)
	}
	third := dial(t, tn.addr)
	third.join("g", "c", "ss")
	if got := top(third.shareFetch(1, tn, "g", "c", 0, "ss", true, 0)); got != errShareSessionLimitReached {
		t.Errorf("third session: code %d, want SHARE_SESSION_LIMIT_REACHED", got)
	}
	// Closing one makes room.
	if got := top(c.shareFetch(1, tn, "g", "a", -1, "ss", false, 0)); got != 0 {
		t.Errorf("close: code %d", got)
	}
	if got := top(third.shareFetch(1, tn, "g", "c", 0, "ss", true, 0)); got != 0 {
		t.Errorf("after a close: code %d", got)
	}
}

// TestShareAcknowledgeStates: ACCEPT, RELEASE, REJECT, RENEW and GAP
// applied to the queue group, and the codes of acknowledging a record
// not acquired, a batch mixing held and not held records (nothing
// applied), and malformed batches.
func TestShareAcknowledgeStates(t *testing.T) {
	tn := startNode(t, withShare(time.Minute, time.Minute, 10))
	shareSetup(t, tn, "as", "g", 6, queue.Config{})
	c := dial(t, tn.addr)
	c.join("g", "a", "as")
	resp := c.shareFetch(2, tn, "g", "a", 0, "as", true, 0)
	if got := acquired(resp)[0]; len(got) != 6 || got[0] != 1 {
		t.Fatalf("acquired %v, want offsets 0-5 at delivery 1", got)
	}
	epoch := int32(1)
	ack := func(version int16, renew bool, acks ...shareAck) int16 {
		t.Helper()
		resp := c.shareAcknowledge(version, tn, "g", "a", epoch, "as", renew, acks...)
		epoch++
		if resp.ErrorCode != 0 {
			t.Fatalf("ShareAcknowledge: top-level code %d", resp.ErrorCode)
		}
		return ackCodes(resp)[0]
	}
	for _, tc := range []struct {
		name    string
		version int16
		renew   bool
		acks    []shareAck
		want    int16
	}{
		{name: "not acquired", version: 1, acks: []shareAck{{0, 10, 10, []int8{1}}}, want: errInvalidRecordState},
		{name: "mixed", version: 1, acks: []shareAck{{0, 4, 6, []int8{1}}}, want: errInvalidRecordState},
		{name: "types do not match the range", version: 1, acks: []shareAck{{0, 0, 2, []int8{1, 1}}}, want: errInvalidRequest},
		{name: "unknown type", version: 1, acks: []shareAck{{0, 0, 0, []int8{9}}}, want: errInvalidRequest},
		{name: "renew without IsRenewAck", version: 2, acks: []shareAck{{0, 0, 0, []int8{4}}}, want: errInvalidRequest},
		{name: "renew at version 1", version: 1, renew: true, acks: []shareAck{{0, 0, 0, []int8{4}}}, want: errInvalidRequest},
		{name: "last before first", version: 1, acks: []shareAck{{0, 3, 2, []int8{1}}}, want: errInvalidRequest},
	} {
		if got := ack(tc.version, tc.renew, tc.acks...); got != tc.want {
			t.Errorf("%s: code %d, want %d", tc.name, got, tc.want)
		}
	}
	st := func() queue.PartitionStats {
		info, err := tn.backend.DescribeQueueGroup("as", "g", time.Now().UnixNano())
		if err != nil {
			t.Fatal(err)
		}
		return info.Partitions[0].PartitionStats
	}
	if s := st(); s.Acked != 0 || s.InFlight != 6 {
		t.Fatalf("after refused acknowledgements: %+v, want nothing applied", s)
	}
	// 0 accept, 1 release, 2 reject, 3 renew (v2), 4 gap (finished),
	// 5 accept.
	if got := ack(2, true, shareAck{0, 3, 3, []int8{4}}); got != 0 {
		t.Fatalf("renew: code %d", got)
	}
	if got := ack(2, false, shareAck{0, 0, 5, []int8{1, 2, 3, 4, 0, 1}}); got != errInvalidRequest {
		t.Fatalf("renew in a batch without IsRenewAck: code %d", got)
	}
	if got := ack(1, false, shareAck{0, 0, 2, []int8{1, 2, 3}}, shareAck{0, 4, 5, []int8{0, 1}}); got != 0 {
		t.Fatalf("accept, release, reject, gap: code %d", got)
	}
	s := st()
	if s.Acked != 3 || s.DeadLettered+s.DeadPending != 1 || s.InFlight != 1 {
		t.Fatalf("stats %+v: want 3 acked (0, 4, 5), 1 dead-lettered (2), 1 in flight (3)", s)
	}
	// The released record comes back at delivery 2.
	resp = c.shareFetch(1, tn, "g", "a", epoch, "as", false, 2*time.Second)
	epoch++
	if got := acquired(resp)[0]; got[1] != 2 || len(got) != 1 {
		t.Fatalf("after release: acquired %v, want offset 1 at delivery 2", got)
	}
	// A second acknowledgement of a finished record fails.
	if got := ack(1, false, shareAck{0, 0, 0, []int8{1}}); got != errInvalidRecordState {
		t.Fatalf("accept again: code %d, want INVALID_RECORD_STATE", got)
	}
}

// TestShareFencing: a record whose lock expired and that another member
// acquired cannot be acknowledged by the first member
// (INVALID_RECORD_STATE), and the second member's ACCEPT stands.
func TestShareFencing(t *testing.T) {
	tn := startNode(t, withShare(time.Minute, 300*time.Millisecond, 10))
	shareSetup(t, tn, "fe", "g", 1, queue.Config{})
	a, b := dial(t, tn.addr), dial(t, tn.addr)
	a.join("g", "a", "fe")
	b.join("g", "b", "fe")
	if got := acquired(a.shareFetch(1, tn, "g", "a", 0, "fe", true, 0))[0]; got[0] != 1 {
		t.Fatalf("a acquired %v", got)
	}
	if got := acquired(b.shareFetch(1, tn, "g", "b", 0, "fe", true, 0)); len(got) != 0 {
		t.Fatalf("b acquired %v while a holds the record", got)
	}
	epoch := int32(1)
	waitFor(t, 10*time.Second, "b acquires the expired record", func() bool {
		got := acquired(b.shareFetch(1, tn, "g", "b", epoch, "fe", false, 500*time.Millisecond))[0]
		epoch++
		return got[0] == 2
	})
	if got := ackCodes(a.shareAcknowledge(1, tn, "g", "a", 1, "fe", false, shareAck{0, 0, 0, []int8{1}}))[0]; got != errInvalidRecordState {
		t.Fatalf("late ack: code %d, want INVALID_RECORD_STATE", got)
	}
	if got := ackCodes(b.shareAcknowledge(1, tn, "g", "b", epoch, "fe", false, shareAck{0, 0, 0, []int8{1}}))[0]; got != 0 {
		t.Fatalf("b's ack: code %d", got)
	}
	info, _ := tn.backend.DescribeQueueGroup("fe", "g", time.Now().UnixNano())
	if p := info.Partitions[0]; p.Acked != 1 || p.Start != 1 {
		t.Fatalf("%+v: want one ack", p.PartitionStats)
	}
}

// TestShareReleaseOnConnectionClose: a member whose connection closes
// (as after kill -9) has its records offered again at once, well before
// their lock expires.
func TestShareReleaseOnConnectionClose(t *testing.T) {
	tn := startNode(t, withShare(time.Minute, time.Hour, 10))
	shareSetup(t, tn, "cc", "g", 5, queue.Config{})
	a, b := dial(t, tn.addr), dial(t, tn.addr)
	a.join("g", "a", "cc")
	b.join("g", "b", "cc")
	if got := acquired(a.shareFetch(1, tn, "g", "a", 0, "cc", true, 0))[0]; len(got) != 5 {
		t.Fatalf("a acquired %v", got)
	}
	a.conn.Close()
	closed := time.Now()
	epoch := int32(0)
	got := map[int64]int16{}
	waitFor(t, 10*time.Second, "b acquires a's records", func() bool {
		for o, d := range acquired(b.shareFetch(1, tn, "g", "b", epoch, "cc", epoch == 0, 200*time.Millisecond))[0] {
			got[o] = d
		}
		epoch++
		return len(got) == 5
	})
	t.Logf("a's records redelivered %v after its connection closed (lock: an hour)", time.Since(closed))
	for o, d := range got {
		if d != 2 {
			t.Errorf("offset %d at delivery %d, want 2", o, d)
		}
	}
}

// TestShareReleaseOnSessionTimeout: a member whose connection stays open
// but which stops heartbeating leaves the group when its session times
// out, and its records are offered again; it is then an unknown member.
func TestShareReleaseOnSessionTimeout(t *testing.T) {
	tn := startNode(t, withShare(time.Second, time.Hour, 10))
	shareSetup(t, tn, "st", "g", 3, queue.Config{})
	a, b := dial(t, tn.addr), dial(t, tn.addr)
	a.join("g", "a", "st")
	bEpoch := b.join("g", "b", "st")
	if got := acquired(a.shareFetch(1, tn, "g", "a", 0, "st", true, 0))[0]; len(got) != 3 {
		t.Fatalf("a acquired %v", got)
	}
	epoch := int32(0)
	got := map[int64]int16{}
	waitFor(t, 20*time.Second, "b acquires a's records", func() bool {
		if hb := b.shareHeartbeat("g", "b", bEpoch); hb.ErrorCode != 0 {
			t.Fatalf("b's heartbeat: code %d", hb.ErrorCode)
		}
		for o, d := range acquired(b.shareFetch(1, tn, "g", "b", epoch, "st", epoch == 0, 200*time.Millisecond))[0] {
			got[o] = d
		}
		epoch++
		return len(got) == 3
	})
	if code := a.shareFetch(1, tn, "g", "a", 1, "st", false, 0).ErrorCode; code != errUnknownMemberID {
		t.Fatalf("a after its session timed out: code %d, want UNKNOWN_MEMBER_ID", code)
	}
}

// shareVersionCase is TestEveryAdvertisedVersion's case for the share-group
// keys: a member joins, fetches the topic's records and accepts them, at
// each version.
func shareVersionCase(t *testing.T, tn *testNode, c *rawClient, key, v int16, name string) bool {
	groupID := fmt.Sprintf("share-%d-v%d", key, v)
	switch key {
	case keyShareGroupHeartbeat:
		resp := c.shareHeartbeat(groupID, "m", 0, "rt")
		if resp.ErrorCode != 0 || resp.MemberEpoch <= 0 || resp.Assignment == nil || len(resp.Assignment.TopicPartitions) != 1 {
			t.Errorf("%s: %+v", name, resp)
		}
	case keyShareGroupDescribe:
		c.shareHeartbeat(groupID, "m", 0, "rt")
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.SetVersion(v)
		req.GroupIDs = []string{groupID, "no-such-group"}
		resp := c.do(req).(*kmsg.ShareGroupDescribeResponse)
		g, missing := resp.Groups[0], resp.Groups[1]
		if g.ErrorCode != 0 || g.GroupState != "Stable" || len(g.Members) != 1 || g.Members[0].MemberID != "m" ||
			len(g.Members[0].Assignment.TopicPartitions) != 1 || len(g.Members[0].Assignment.TopicPartitions[0].Partitions) != 2 {
			t.Errorf("%s: %+v", name, g)
		}
		if missing.ErrorCode != errGroupIDNotFound {
			t.Errorf("%s: unknown group: code %d, want GROUP_ID_NOT_FOUND", name, missing.ErrorCode)
		}
		list := kmsg.NewPtrListGroupsRequest()
		list.SetVersion(5)
		list.TypesFilter = []string{"share"}
		lresp := c.do(list).(*kmsg.ListGroupsResponse)
		if !slices.ContainsFunc(lresp.Groups, func(lg kmsg.ListGroupsResponseGroup) bool {
			return lg.Group == groupID && lg.GroupType == "share" && lg.GroupState == "Stable"
		}) || slices.ContainsFunc(lresp.Groups, func(lg kmsg.ListGroupsResponseGroup) bool { return lg.GroupType != "share" }) {
			t.Errorf("%s: ListGroups of type share: %+v", name, lresp.Groups)
		}
	case keyDescribeShareGroupOffsets:
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if _, err := tn.backend.CreateQueueGroup(ctx, backend.QueueCreate{Topic: "rt", Group: groupID}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		info, _ := tn.backend.DescribeQueueGroup("rt", groupID, time.Now().UnixNano())
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		req.SetVersion(v)
		rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		rg.GroupID = groupID // Topics nil: every topic of the group
		req.Groups = append(req.Groups, rg)
		resp := c.do(req).(*kmsg.DescribeShareGroupOffsetsResponse)
		g := resp.Groups[0]
		if g.ErrorCode != 0 || len(g.Topics) != 1 || g.Topics[0].Topic != "rt" || len(g.Topics[0].Partitions) != 2 {
			t.Fatalf("%s: %+v", name, g)
		}
		p := g.Topics[0].Partitions[1]
		wantLag := info.Partitions[1].End - info.Partitions[1].Start
		if p.StartOffset != 0 || v >= 1 && p.Lag != wantLag {
			t.Errorf("%s: partition 1 start %d lag %d, want 0 and %d", name, p.StartOffset, p.Lag, wantLag)
		}
	case keyShareFetch, keyShareAcknowledge:
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if _, err := tn.backend.CreateQueueGroup(ctx, backend.QueueCreate{Topic: "rt", Group: groupID}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c.join(groupID, "m", "rt")
		resp := c.shareFetch(v, tn, groupID, "m", 0, "rt", true, 0)
		got := acquired(resp)
		if resp.ErrorCode != 0 || len(got[1]) == 0 {
			t.Errorf("%s: code %d, acquired %v", name, resp.ErrorCode, got)
			return true
		}
		var acks []shareAck
		for o := range got[1] {
			acks = append(acks, shareAck{1, o, o, []int8{1}})
		}
		if key == keyShareFetch {
			_, ackc := shareCodes(c.shareFetch(v, tn, groupID, "m", 1, "rt", false, 0, acks...))
			if ackc[1] != 0 {
				t.Errorf("%s: acknowledgement code %d", name, ackc[1])
			}
		} else if code := ackCodes(c.shareAcknowledge(v, tn, groupID, "m", 1, "rt", false, acks...))[1]; code != 0 {
			t.Errorf("%s: acknowledgement code %d", name, code)
		}
		info, _ := tn.backend.DescribeQueueGroup("rt", groupID, time.Now().UnixNano())
		if info.Partitions[1].Acked != int64(len(acks)) {
			t.Errorf("%s: %d acked, want %d", name, info.Partitions[1].Acked, len(acks))
		}
	default:
		return shareOffsetsVersionCase(t, tn, c, key, v, name)
	}
	return true
}

// TestShareJoinReleasesEarlierLeases: leases a member's claims hold that
// this node does not know of (handed out by an earlier leader, here
// claimed straight through the backend under the member's worker name)
// are released, replicated, when the member joins: another member
// acquires the records at once, at delivery 2, not when their hour-long
// lock expires. At a feature level below the release's the join still
// succeeds, and the leases are kept.
func TestShareJoinReleasesEarlierLeases(t *testing.T) {
	for _, tc := range []struct {
		name     string
		level    backend.FeatureLevel
		released bool
	}{
		{name: "release level", released: true},
		{name: "before the release level", level: backend.FeatureLevel(fsm.ProducerLevel)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := startNodeWith(t, replicationtest.Options{FeatureLevel: tc.level}, withShare(time.Minute, time.Hour, 10))
			shareSetup(t, tn, "rj", "g", 3, queue.Config{})
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			res, err := tn.backend.QueueClaimWait(ctx, backend.QueueClaim{Topic: "rj", Group: "g", Max: 3, Lease: time.Hour, Worker: shareWorker("a")}, 0, nil)
			if err != nil || len(res.Records) != 3 {
				t.Fatalf("claim: %d records, %v", len(res.Records), err)
			}
			a, b := dial(t, tn.addr), dial(t, tn.addr)
			b.join("g", "b", "rj")
			a.join("g", "a", "rj")
			got := acquired(b.shareFetch(1, tn, "g", "b", 0, "rj", true, 0))[0]
			if !tc.released {
				if len(got) != 0 {
					t.Fatalf("acquired %v below the release level", got)
				}
				return
			}
			if len(got) != 3 || got[0] != 2 {
				t.Fatalf("b acquired %v, want offsets 0-2 at delivery 2", got)
			}
		})
	}
}

// TestShareTopicCreatedLater: a member subscribed to a topic that does
// not exist yet is assigned it, and fetches from its queue group, once
// the topic is created (the client sends its subscription only once).
func TestShareTopicCreatedLater(t *testing.T) {
	tn := startNode(t)
	c := dial(t, tn.addr)
	epoch := c.join("g", "m", "later")
	tn.createTopic("later", 1, nil)
	resp := c.shareHeartbeat("g", "m", epoch)
	if resp.ErrorCode != 0 || resp.Assignment == nil || len(resp.Assignment.TopicPartitions) != 1 {
		t.Fatalf("after the topic was created: %+v", resp)
	}
	if !queueGroupExists(tn, "later", "g") {
		t.Fatal("no queue group on the topic created later")
	}
	fetch := c.shareFetch(1, tn, "g", "m", 0, "later", true, 0)
	if codes, _ := shareCodes(fetch); fetch.ErrorCode != 0 || codes[0] != 0 {
		t.Fatalf("fetch: code %d, partition codes %v", fetch.ErrorCode, codes)
	}
}

// TestShareLockAfterLeaderChange: a group's share.record.lock.duration.ms
// holds whatever the node's default lock: deliveries are leased for the
// queue group's lease, where the setting is written (and the setting is
// replicated state, so a new leader reads it too), and the answer's lock
// is what is left of it.
func TestShareLockAfterLeaderChange(t *testing.T) {
	tn := startNode(t, withShare(time.Minute, time.Hour, 10))
	shareSetup(t, tn, "lc", "g", 2, queue.Config{})
	c := dial(t, tn.addr)
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Op, cfg.Value = "share.record.lock.duration.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("5000")
	rr.Configs = append(rr.Configs, cfg)
	req.Resources = append(req.Resources, rr)
	if r := c.do(req).(*kmsg.IncrementalAlterConfigsResponse); r.Resources[0].ErrorCode != 0 {
		t.Fatalf("alter group configs: code %d", r.Resources[0].ErrorCode)
	}
	c.join("g", "m", "lc")
	before := time.Now()
	resp := c.shareFetch(1, tn, "g", "m", 0, "lc", true, 0)
	if got := acquired(resp)[0]; len(got) != 2 {
		t.Fatalf("acquired %v, want both records", got)
	}
	if ms := resp.AcquisitionLockTimeoutMillis; ms <= 0 || ms > 5000 {
		t.Errorf("AcquisitionLockTimeoutMillis %d, want at most the group's 5000", ms)
	}
	recs, _, err := tn.backend.QueueInFlight("lc", "g", time.Now().UnixNano(), 0)
	if err != nil || len(recs) != 2 {
		t.Fatalf("in flight: %v, %v", recs, err)
	}
	for _, r := range recs {
		if until := time.Unix(0, r.LeaseUntil); until.After(time.Now().Add(5 * time.Second)) {
			t.Errorf("offset %d leased until %v, %v after the fetch began: want the group's 5 s", r.Offset, until, until.Sub(before))
		}
	}
}
