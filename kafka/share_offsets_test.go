package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/queue"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/replicationtest"
)

// alterShareOffsets sends an AlterShareGroupOffsets of one topic.
func (c *rawClient) alterShareOffsets(groupID, topic string, starts map[int32]int64) *kmsg.AlterShareGroupOffsetsResponse {
	c.t.Helper()
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = groupID
	rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
	rt.Topic = topic
	for p, o := range starts {
		rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
		rp.Partition, rp.StartOffset = p, o
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return c.do(req).(*kmsg.AlterShareGroupOffsetsResponse)
}

// alterCodes lists an AlterShareGroupOffsets answer's partition codes of
// its first topic.
func alterCodes(resp *kmsg.AlterShareGroupOffsetsResponse) map[int32]int16 {
	out := map[int32]int16{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p.ErrorCode
		}
	}
	return out
}

// deleteShareOffsets sends a DeleteShareGroupOffsets of topics and
// returns the answer's top-level code and topic codes.
func (c *rawClient) deleteShareOffsets(groupID string, topics ...string) (int16, map[string]int16) {
	c.t.Helper()
	req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	req.GroupID = groupID
	for _, t := range topics {
		rt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
		rt.Topic = t
		req.Topics = append(req.Topics, rt)
	}
	resp := c.do(req).(*kmsg.DeleteShareGroupOffsetsResponse)
	out := map[string]int16{}
	for _, t := range resp.Topics {
		out[t.Topic] = t.ErrorCode
	}
	return resp.ErrorCode, out
}

// queueStart is a queue group's start offset on a partition.
func queueStart(t *testing.T, tn *testNode, topic, groupID string, p int32) int64 {
	t.Helper()
	info, err := tn.backend.DescribeQueueGroup(topic, groupID, time.Now().UnixNano())
	if err != nil {
		t.Fatal(err)
	}
	return info.Partitions[p].Start
}

// TestAlterShareGroupOffsets: the start of a share group's partition
// moves to the offset asked, and a member then acquires from it; the
// refusals: a group with members (NON_EMPTY_GROUP, nothing moved), a
// record in flight to a worker of logd's API (NON_EMPTY_GROUP for the
// topic's partitions), a partition the topic lacks, a negative start, a
// start past the end, an unknown topic, an invalid group id. A group that
// never consumed the topic is created there at the start asked.
func TestAlterShareGroupOffsets(t *testing.T) {
	tn := startNode(t, withShare(time.Minute, time.Minute, 10))
	shareSetup(t, tn, "ao", "g", 5, queue.Config{})
	c := dial(t, tn.addr)

	for _, tc := range []struct {
		name   string
		group  string
		topic  string
		starts map[int32]int64
		top    int16
		want   map[int32]int16
	}{
		{name: "invalid group id", group: "", topic: "ao", starts: map[int32]int64{0: 1}, top: errInvalidGroupID, want: map[int32]int16{}},
		{name: "unknown topic", group: "g", topic: "nope", starts: map[int32]int64{0: 1}, want: map[int32]int16{0: errUnknownTopicOrPartition}},
		{name: "bad partition", group: "g", topic: "ao", starts: map[int32]int64{7: 1, -1: 1}, want: map[int32]int16{7: errUnknownTopicOrPartition, -1: errUnknownTopicOrPartition}},
		{name: "negative start", group: "g", topic: "ao", starts: map[int32]int64{0: -1}, want: map[int32]int16{0: errInvalidRequest}},
		{name: "past the end", group: "g", topic: "ao", starts: map[int32]int64{0: 6}, want: map[int32]int16{0: errOffsetOutOfRange}},
		{name: "moved", group: "g", topic: "ao", starts: map[int32]int64{0: 3}, want: map[int32]int16{0: errNone}},
		{name: "new group", group: "fresh", topic: "ao", starts: map[int32]int64{0: 5}, want: map[int32]int16{0: errNone}},
	} {
		resp := c.alterShareOffsets(tc.group, tc.topic, tc.starts)
		if resp.ErrorCode != tc.top || !mapsEqual(alterCodes(resp), tc.want) {
			t.Errorf("%s: code %s, partitions %v; want %s, %v", tc.name, errorName(resp.ErrorCode), alterCodes(resp), errorName(tc.top), tc.want)
		}
	}
	if got := queueStart(t, tn, "ao", "g", 0); got != 3 {
		t.Fatalf("start of g: %d, want 3", got)
	}
	if got := queueStart(t, tn, "ao", "fresh", 0); got != 5 {
		t.Fatalf("start of the new group: %d, want 5", got)
	}

	// A member acquires from the new start; while it is a member (and
	// holds records) the group is not empty.
	c.join("g", "m", "ao")
	got := acquired(c.shareFetch(1, tn, "g", "m", 0, "ao", true, 0))[0]
	if len(got) != 2 || got[3] != 1 || got[4] != 1 {
		t.Fatalf("acquired %v, want offsets 3 and 4", got)
	}
	if resp := c.alterShareOffsets("g", "ao", map[int32]int64{0: 0}); resp.ErrorCode != errNonEmptyGroup || len(resp.Topics) != 0 {
		t.Fatalf("with a member: code %s, %+v", errorName(resp.ErrorCode), resp.Topics)
	}
	leave := c.shareHeartbeat("g", "m", -1)
	if leave.ErrorCode != 0 {
		t.Fatalf("leave: %s", errorName(leave.ErrorCode))
	}

	// A worker of logd's API holds a record: the queue group refuses.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if res, err := tn.backend.QueueClaimWait(ctx, backend.QueueClaim{Topic: "ao", Group: "g", Max: 1, Lease: time.Hour, Worker: "w"}, 0, nil); err != nil || len(res.Records) != 1 {
		t.Fatalf("claim: %d records, %v", len(res.Records), err)
	}
	if codes := alterCodes(c.alterShareOffsets("g", "ao", map[int32]int64{0: 0})); codes[0] != errNonEmptyGroup {
		t.Fatalf("with a record in flight: %v", codes)
	}
}

// TestDeleteShareGroupOffsets: deleting a share group's state on a topic
// deletes its queue group there, and a later member's heartbeat creates
// it again; an unknown group is GROUP_ID_NOT_FOUND, a group with members
// or with a record in flight NON_EMPTY_GROUP, an unknown topic
// UNKNOWN_TOPIC_OR_PARTITION, and a topic without the group's state has
// nothing to delete.
func TestDeleteShareGroupOffsets(t *testing.T) {
	tn := startNode(t, withShare(time.Minute, time.Minute, 10))
	shareSetup(t, tn, "do", "g", 3, queue.Config{})
	tn.createTopic("bare", 1, nil)
	c := dial(t, tn.addr)

	if top, _ := c.deleteShareOffsets("nobody", "do"); top != errGroupIDNotFound {
		t.Errorf("unknown group: %s", errorName(top))
	}
	c.join("g", "m", "do")
	if top, _ := c.deleteShareOffsets("g", "do"); top != errNonEmptyGroup {
		t.Errorf("with a member: %s", errorName(top))
	}
	c.shareHeartbeat("g", "m", -1)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := tn.backend.QueueClaimWait(ctx, backend.QueueClaim{Topic: "do", Group: "g", Max: 1, Lease: 200 * time.Millisecond, Worker: "w"}, 0, nil); err != nil {
		t.Fatal(err)
	}
	if _, codes := c.deleteShareOffsets("g", "do"); codes["do"] != errNonEmptyGroup {
		t.Errorf("with a record in flight: %v", codes)
	}
	waitFor(t, 10*time.Second, "the lease to expire", func() bool {
		_, codes := c.deleteShareOffsets("g", "do")
		return codes["do"] == errNone
	})
	if queueGroupExists(tn, "do", "g") {
		t.Fatal("the queue group is still there")
	}
	top, codes := c.deleteShareOffsets("g", "do", "bare", "nope")
	if want := map[string]int16{"do": errNone, "bare": errNone, "nope": errUnknownTopicOrPartition}; top != errNone || !mapsEqual(codes, want) {
		t.Errorf("second delete: %s %v, want %v", errorName(top), codes, want)
	}
	c.join("g", "m2", "do")
	if !queueGroupExists(tn, "do", "g") {
		t.Fatal("a heartbeat did not create the queue group again")
	}
}

// TestShareOffsetsBelowLevel: before every member's build applies the
// commands that move and delete queue groups, ApiVersions does not list
// AlterShareGroupOffsets and DeleteShareGroupOffsets, and a request that
// comes anyway is UNSUPPORTED_VERSION.
func TestShareOffsetsBelowLevel(t *testing.T) {
	tn := startNodeWith(t, replicationtest.Options{FeatureLevel: backend.FeatureLevel(fsm.QueueReleaseLevel)})
	shareSetup(t, tn, "lv", "g", 1, queue.Config{})
	c := dial(t, tn.addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	for _, k := range c.do(req).(*kmsg.ApiVersionsResponse).ApiKeys {
		if k.ApiKey == keyAlterShareGroupOffsets || k.ApiKey == keyDeleteShareGroupOffsets {
			t.Errorf("key %d listed below the level", k.ApiKey)
		}
	}
	if resp := c.alterShareOffsets("g", "lv", map[int32]int64{0: 1}); resp.ErrorCode != errUnsupportedVersion {
		t.Errorf("alter: %s", errorName(resp.ErrorCode))
	}
	if top, _ := c.deleteShareOffsets("g", "lv"); top != errUnsupportedVersion {
		t.Errorf("delete: %s", errorName(top))
	}
}

// TestKadmShareGroupOffsets: kadm's AlterShareGroupOffsets,
// DescribeShareGroupOffsets and DeleteShareGroupOffsets against a node,
// with kerr's errors for a group with members.
func TestKadmShareGroupOffsets(t *testing.T) {
	tn := startNode(t, withShare(time.Minute, time.Minute, 10))
	shareSetup(t, tn, "ka", "g", 4, queue.Config{})
	adm := kadm.NewClient(newKgo(t, tn.addr))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	var offsets kadm.Offsets
	offsets.Add(kadm.Offset{Topic: "ka", Partition: 0, At: 2})
	rs, err := adm.AlterShareGroupOffsets(ctx, "g", offsets)
	if err != nil || !rs.Ok() {
		t.Fatalf("alter: %v %v", rs, err)
	}
	described, err := adm.DescribeShareGroupOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	o, ok := described["g"].Offsets.Lookup("ka", 0)
	if !ok || o.StartOffset != 2 {
		t.Fatalf("described %+v", described["g"])
	}

	c := dial(t, tn.addr)
	c.join("g", "m", "ka")
	if _, err := adm.AlterShareGroupOffsets(ctx, "g", offsets); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Errorf("alter with a member: %v", err)
	}
	if _, err := adm.DeleteShareGroupOffsets(ctx, "g", "ka"); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Errorf("delete with a member: %v", err)
	}
	c.shareHeartbeat("g", "m", -1)
	drs, err := adm.DeleteShareGroupOffsets(ctx, "g", "ka")
	if err != nil || !drs.Ok() {
		t.Fatalf("delete: %v %v", drs, err)
	}
	if slices.Contains(tn.backend.QueueGroups("ka"), "g") {
		t.Fatal("the queue group is still there")
	}
}

// mapsEqual reports whether two maps hold the same entries.
func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// shareOffsetsVersionCase is TestEveryAdvertisedVersion's case of
// AlterShareGroupOffsets and DeleteShareGroupOffsets.
func shareOffsetsVersionCase(t *testing.T, tn *testNode, c *rawClient, key, v int16, name string) bool {
	groupID := fmt.Sprintf("share-%d-v%d", key, v)
	switch key {
	case keyAlterShareGroupOffsets:
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.SetVersion(v)
		req.GroupID = groupID
		rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		rt.Topic = "rt"
		rt.Partitions = []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 1, StartOffset: 1}}
		req.Topics = append(req.Topics, rt)
		resp := c.do(req).(*kmsg.AlterShareGroupOffsetsResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 || queueStart(t, tn, "rt", groupID, 1) != 1 {
			t.Errorf("%s: %+v", name, resp)
		}
	case keyDeleteShareGroupOffsets:
		c.join(groupID, "m", "rt")
		c.shareHeartbeat(groupID, "m", -1)
		req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
		req.SetVersion(v)
		req.GroupID = groupID
		req.Topics = []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: "rt"}}
		resp := c.do(req).(*kmsg.DeleteShareGroupOffsetsResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || queueGroupExists(tn, "rt", groupID) {
			t.Errorf("%s: %+v", name, resp)
		}
	default:
		return false
	}
	return true
}
