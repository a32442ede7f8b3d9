package kafka

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fastGroups makes a test node's coordinator quick: no initial rebalance
// delay, and sessions as short as 100ms.
func fastGroups(o *Options) {
	o.Groups.InitialRebalanceDelay = -1
	o.Groups.MinSessionTimeout = 100 * time.Millisecond
}

// joinReq builds a JoinGroup of the "consumer" protocol type with one
// assignor, whose metadata subscribes to topics.
func joinReq(version int16, groupID, memberID string, session time.Duration, topics ...string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.SetVersion(version)
	req.Group, req.MemberID, req.ProtocolType = groupID, memberID, "consumer"
	req.SessionTimeoutMillis = int32(session.Milliseconds())
	req.RebalanceTimeoutMillis = int32(session.Milliseconds())
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = topics
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", meta.AppendTo(nil)
	req.Protocols = append(req.Protocols, p)
	return req
}

// joinOne joins a new member to groupID with the newest JoinGroup (the
// member id dance of KIP-394 included) and returns the answer.
func joinOne(t testing.TB, c *rawClient, groupID string, topics ...string) *kmsg.JoinGroupResponse {
	t.Helper()
	resp := c.do(joinReq(9, groupID, "", 10*time.Second, topics...)).(*kmsg.JoinGroupResponse)
	if resp.ErrorCode == errMemberIDRequired {
		resp = c.do(joinReq(9, groupID, resp.MemberID, 10*time.Second, topics...)).(*kmsg.JoinGroupResponse)
	}
	if resp.ErrorCode != errNone {
		t.Fatalf("join %s: %s", groupID, errorName(resp.ErrorCode))
	}
	return resp
}

// syncOne syncs a member with an assignment for itself when it leads.
func syncOne(t testing.TB, c *rawClient, version int16, groupID string, jr *kmsg.JoinGroupResponse, assignment []byte) *kmsg.SyncGroupResponse {
	t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.SetVersion(version)
	req.Group, req.Generation, req.MemberID = groupID, jr.Generation, jr.MemberID
	if version >= 5 {
		req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), jr.Protocol
	}
	if jr.LeaderID == jr.MemberID {
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID, a.MemberAssignment = jr.MemberID, assignment
		req.GroupAssignment = append(req.GroupAssignment, a)
	}
	return c.do(req).(*kmsg.SyncGroupResponse)
}

// simpleCommit commits one offset outside any generation.
func simpleCommit(version int16, groupID, topic string, partition int32, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(version)
	req.Group = groupID
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func commitCode(t testing.TB, resp kmsg.Response) int16 {
	t.Helper()
	r := resp.(*kmsg.OffsetCommitResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("commit response shape: %+v", r)
	}
	return r.Topics[0].Partitions[0].ErrorCode
}

// fetchOffsetReq asks for one partition's committed offset.
func fetchOffsetReq(version int16, groupID, topic string, partition int32) *kmsg.OffsetFetchRequest {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(version)
	if version >= 8 {
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = groupID
		gt := kmsg.NewOffsetFetchRequestGroupTopic()
		gt.Topic, gt.Partitions = topic, []int32{partition}
		g.Topics = append(g.Topics, gt)
		req.Groups = append(req.Groups, g)
		return req
	}
	req.Group = groupID
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	req.Topics = append(req.Topics, rt)
	return req
}

// fetchedOffset returns the one partition of an OffsetFetch answer.
func fetchedOffset(t testing.TB, resp kmsg.Response) (int64, int16) {
	t.Helper()
	r := resp.(*kmsg.OffsetFetchResponse)
	if r.Version >= 8 {
		if len(r.Groups) != 1 || len(r.Groups[0].Topics) != 1 || len(r.Groups[0].Topics[0].Partitions) != 1 {
			t.Fatalf("offset fetch response shape: %+v", r)
		}
		p := r.Groups[0].Topics[0].Partitions[0]
		return p.Offset, max(r.Groups[0].ErrorCode, p.ErrorCode)
	}
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("offset fetch response shape: %+v", r)
	}
	p := r.Topics[0].Partitions[0]
	return p.Offset, max(r.ErrorCode, p.ErrorCode)
}

// groupVersionCase is TestEveryAdvertisedVersion's case of a group key at
// version v; "rt" has 2 partitions, and partition 1 holds 9 records by
// then. It reports whether key is a group key.
func groupVersionCase(t *testing.T, tn *testNode, c *rawClient, key, v int16, name string) bool {
	switch key {
	case keyOffsetCommit:
		if code := commitCode(t, c.do(simpleCommit(v, "rt-commits", "rt", 1, int64(v)))); code != errNone {
			t.Errorf("%s: %s", name, errorName(code))
		}
		if g, err := tn.backend.ConsumerGroup("rt-commits"); err != nil || g.Topics["rt"].Partitions[1].Committed != int64(v) {
			t.Errorf("%s: logd's group %+v, %v; want offset %d", name, g, err, v)
		}
	case keyOffsetFetch:
		if off, code := fetchedOffset(t, c.do(fetchOffsetReq(v, "rt-commits", "rt", 1))); code != errNone || off != 9 {
			t.Errorf("%s: offset %d (%s); want 9", name, off, errorName(code))
		}
		if off, code := fetchedOffset(t, c.do(fetchOffsetReq(v, "rt-nobody", "rt", 1))); code != errNone || off != -1 {
			t.Errorf("%s: unknown group: offset %d (%s); want -1", name, off, errorName(code))
		}
	case keyFindCoordinator:
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(v)
		req.CoordinatorKey, req.CoordinatorKeys = "g", []string{"g", "h"}
		resp := c.do(req).(*kmsg.FindCoordinatorResponse)
		_, port, _ := splitHostPort(tn.addr)
		if v >= 4 {
			if len(resp.Coordinators) != 2 || resp.Coordinators[1].Key != "h" || resp.Coordinators[1].Port != port || resp.Coordinators[1].ErrorCode != 0 {
				t.Errorf("%s: %+v", name, resp)
			}
		} else if resp.ErrorCode != 0 || resp.Port != port || resp.NodeID != 1 {
			t.Errorf("%s: %+v", name, resp)
		}
	case keyJoinGroup:
		id := fmt.Sprintf("join-v%d", v)
		resp := c.do(joinReq(v, id, "", 10*time.Second, "rt")).(*kmsg.JoinGroupResponse)
		if v >= 4 {
			if resp.ErrorCode != errMemberIDRequired || resp.MemberID == "" {
				t.Errorf("%s: %s, member %q; want MEMBER_ID_REQUIRED", name, errorName(resp.ErrorCode), resp.MemberID)
				return true
			}
			resp = c.do(joinReq(v, id, resp.MemberID, 10*time.Second, "rt")).(*kmsg.JoinGroupResponse)
		}
		if resp.ErrorCode != 0 || resp.Generation != 1 || resp.LeaderID != resp.MemberID || len(resp.Members) != 1 || *resp.Protocol != "range" {
			t.Errorf("%s: %+v", name, resp)
		}
	case keyHeartbeat:
		id := fmt.Sprintf("hb-v%d", v)
		jr := joinOne(t, c, id, "rt")
		req := kmsg.NewPtrHeartbeatRequest()
		req.SetVersion(v)
		req.Group, req.Generation, req.MemberID = id, jr.Generation, jr.MemberID
		if code := c.do(req).(*kmsg.HeartbeatResponse).ErrorCode; code != 0 {
			t.Errorf("%s: %s", name, errorName(code))
		}
		req.Generation++
		if code := c.do(req).(*kmsg.HeartbeatResponse).ErrorCode; code != errIllegalGeneration {
			t.Errorf("%s: next generation: %s", name, errorName(code))
		}
	case keyLeaveGroup:
		id := fmt.Sprintf("leave-v%d", v)
		jr := joinOne(t, c, id, "rt")
		req := kmsg.NewPtrLeaveGroupRequest()
		req.SetVersion(v)
		req.Group, req.MemberID = id, jr.MemberID
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = jr.MemberID
		req.Members = append(req.Members, m)
		resp := c.do(req).(*kmsg.LeaveGroupResponse)
		if resp.ErrorCode != 0 || v >= 3 && (len(resp.Members) != 1 || resp.Members[0].ErrorCode != 0) {
			t.Errorf("%s: %+v", name, resp)
		}
		if tn.srv.groups.busy(id) {
			t.Errorf("%s: the member is still in the group", name)
		}
	case keySyncGroup:
		id := fmt.Sprintf("sync-v%d", v)
		jr := joinOne(t, c, id, "rt")
		want := []byte(id)
		resp := syncOne(t, c, v, id, jr, want)
		if resp.ErrorCode != 0 || string(resp.MemberAssignment) != id {
			t.Errorf("%s: %+v", name, resp)
		}
	case keyDescribeGroups:
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.SetVersion(v)
		req.Groups = []string{"sync-v5", "rt-commits", "nobody"}
		resp := c.do(req).(*kmsg.DescribeGroupsResponse)
		if len(resp.Groups) != 3 {
			t.Fatalf("%s: %+v", name, resp)
		}
		g := resp.Groups[0]
		if g.ErrorCode != 0 || g.State != "Stable" || g.Protocol != "range" || len(g.Members) != 1 || string(g.Members[0].MemberAssignment) != "sync-v5" {
			t.Errorf("%s: %+v", name, g)
		}
		if g := resp.Groups[1]; g.State != "Empty" || len(g.Members) != 0 {
			t.Errorf("%s: an offsets-only group: %+v", name, g)
		}
		if g := resp.Groups[2]; g.ErrorCode != 0 || g.State != "Dead" {
			t.Errorf("%s: an unknown group: %+v", name, g)
		}
	case keyListGroups:
		req := kmsg.NewPtrListGroupsRequest()
		req.SetVersion(v)
		resp := c.do(req).(*kmsg.ListGroupsResponse)
		i := slices.IndexFunc(resp.Groups, func(g kmsg.ListGroupsResponseGroup) bool { return g.Group == "sync-v5" })
		j := slices.IndexFunc(resp.Groups, func(g kmsg.ListGroupsResponseGroup) bool { return g.Group == "rt-commits" })
		if resp.ErrorCode != 0 || i < 0 || j < 0 || resp.Groups[i].ProtocolType != "consumer" || v >= 4 && (resp.Groups[i].GroupState != "Stable" || resp.Groups[j].GroupState != "Empty") {
			t.Errorf("%s: %+v", name, resp)
		}
	case keyDeleteGroups:
		id := fmt.Sprintf("del-v%d", v)
		if code := commitCode(t, c.do(simpleCommit(9, id, "rt", 0, 0))); code != 0 {
			t.Fatalf("%s: commit: %s", name, errorName(code))
		}
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.SetVersion(v)
		req.Groups = []string{id, "sync-v5", "nobody"}
		resp := c.do(req).(*kmsg.DeleteGroupsResponse)
		if len(resp.Groups) != 3 || resp.Groups[0].ErrorCode != 0 || resp.Groups[1].ErrorCode != errNonEmptyGroup || resp.Groups[2].ErrorCode != errGroupIDNotFound {
			t.Errorf("%s: %+v", name, resp)
		}
		if _, err := tn.backend.ConsumerGroup(id); err == nil {
			t.Errorf("%s: logd still has the group", name)
		}
	case keyOffsetDelete:
		if code := commitCode(t, c.do(simpleCommit(9, "odel", "rt", 0, 0))); code != 0 {
			t.Fatalf("%s: commit: %s", name, errorName(code))
		}
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.SetVersion(v)
		req.Group = "odel"
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = "rt"
		rt.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}, {Partition: 5}}
		req.Topics = append(req.Topics, rt)
		resp := c.do(req).(*kmsg.OffsetDeleteResponse)
		if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 || resp.Topics[0].Partitions[1].ErrorCode != errUnknownTopicOrPartition {
			t.Errorf("%s: %+v", name, resp)
		}
		if g, _ := tn.backend.ConsumerGroup("odel"); g == nil || g.Topics["rt"].Partitions[0].Committed != -1 {
			t.Errorf("%s: offset still committed: %+v", name, g)
		}
	default:
		return false
	}
	return true
}
