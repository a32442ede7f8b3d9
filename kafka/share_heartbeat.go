package kafka

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/group"
)

// shareGroupHeartbeat answers ShareGroupHeartbeat (version 1): a member
// joins with epoch 0 and its subscription, heartbeats with the epoch it
// was given, and leaves with -1. Every member is assigned every partition
// of the topics it subscribes to: records, not partitions, are what a
// share group divides, and the queue group hands each record to one
// member at a time.
func (s *Server) shareGroupHeartbeat(ctx context.Context, rc *reqCtx, req *kmsg.ShareGroupHeartbeatRequest, clientID, clientHost string) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	fail := refuser(rc, resp, &resp.ErrorCode, &resp.ErrorMessage)
	switch {
	case group.ValidateName("group", req.GroupID) != nil:
		return fail(errInvalidGroupID, "")
	case req.MemberID == "" || len(req.MemberID) > 128:
		return fail(errInvalidRequest, "a member id of 1 to 128 bytes is required")
	case req.MemberEpoch < -1:
		return fail(errInvalidRequest, fmt.Sprintf("member epoch %d", req.MemberEpoch))
	case req.MemberEpoch == 0 && len(req.SubscribedTopicNames) == 0:
		return fail(errInvalidRequest, "a joining member must subscribe to topics")
	case !rc.mayGroup(req.GroupID):
		return fail(errGroupAuthorizationFailed, "")
	}
	for _, t := range req.SubscribedTopicNames {
		if !rc.mayTopic(t) {
			return fail(errTopicAuthorizationFailed, "")
		}
	}
	if !s.share.lead(ctx) {
		// A group FindCoordinator sent here before it was a share group
		// (share_forward.go).
		if fwd, ok := s.forwardShareFrom(ctx, rc, req, 0, clientID); ok {
			rc.note(fwd.(*kmsg.ShareGroupHeartbeatResponse).ErrorCode)
			return fwd
		}
		return fail(errNotCoordinator, "")
	}
	if req.MemberEpoch == -1 {
		s.share.leave(req.GroupID, req.MemberID)
		resp.MemberID = kmsg.StringPtr(req.MemberID)
		resp.MemberEpoch = -1
		return resp
	}
	// Every heartbeat, so that a subscribed topic created later gets its
	// queue group (the subscription is sent only when it changes).
	topics := req.SubscribedTopicNames
	if topics == nil {
		topics = s.share.topicsOf(req.GroupID, req.MemberID)
	}
	if err := s.share.ensureQueueGroups(ctx, req.GroupID, topics); err != nil {
		return fail(groupCode(err), err.Error())
	}
	joined := req.MemberEpoch == 0 && !s.share.known(req.GroupID, req.MemberID)
	code, msg := s.share.heartbeat(req, resp, clientID, clientHost)
	if code != errNone {
		return fail(code, msg)
	}
	if joined {
		// A member this node does not know may hold leases an earlier
		// leader handed it, in a session that ended with that leader's
		// term: its client dropped them, so they are offered again now
		// rather than when their locks expire.
		s.share.releaseWorker(req.GroupID, req.MemberID, req.SubscribedTopicNames, "released: share-group member joined a new leader")
	}
	return resp
}

// topicsOf is a member's subscription (nil for an unknown member).
func (c *shareCoordinator) topicsOf(groupName, member string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, m := c.memberLocked(groupName, member); m != nil {
		return m.topics
	}
	return nil
}

// known reports whether a group has a member.
func (c *shareCoordinator) known(groupName, member string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, m := c.memberLocked(groupName, member)
	return m != nil
}

// leave removes a member and releases what it holds.
func (c *shareCoordinator) leave(groupName, member string) {
	c.mu.Lock()
	g := c.groups[groupName]
	if g == nil || g.members[member] == nil {
		c.mu.Unlock()
		return
	}
	r := c.removeMemberLocked(g, g.members[member])
	c.mu.Unlock()
	c.giveBack(groupName, r, "released: share-group member left")
}

func (c *shareCoordinator) heartbeat(req *kmsg.ShareGroupHeartbeatRequest, resp *kmsg.ShareGroupHeartbeatResponse, clientID, clientHost string) (int16, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errNotCoordinator, ""
	}
	g := c.groups[req.GroupID]
	var m *shareMember
	if g != nil {
		m = g.members[req.MemberID]
	}
	switch {
	case req.MemberEpoch == 0 && m == nil:
		if g == nil {
			g = &shareGroup{name: req.GroupID, members: map[string]*shareMember{}, held: map[sharePart]map[int64]held{}}
			c.groups[req.GroupID] = g
		}
		if len(g.members) >= c.opts.maxMembers {
			return errGroupMaxSizeReached, ""
		}
		g.epoch++
		m = &shareMember{id: req.MemberID, epoch: 0, clientID: clientID, clientHost: clientHost}
		name := req.GroupID
		m.timer = time.AfterFunc(c.opts.sessionTimeout, func() { c.onSession(name, m) })
		g.members[m.id] = m
	case m == nil:
		return errUnknownMemberID, ""
	case req.MemberEpoch == 0:
		// A member joining again with its id (after a fence): it keeps
		// its records, whose acks its client drops anyway.
		m.assigned = ""
	case req.MemberEpoch != m.epoch:
		return errFencedMemberEpoch, fmt.Sprintf("member epoch %d, expected %d", req.MemberEpoch, m.epoch)
	}
	m.timer.Reset(c.opts.sessionTimeout)
	if req.SubscribedTopicNames != nil {
		topics := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(topics)
		m.topics = slices.Compact(topics)
	}
	resp.MemberID = kmsg.StringPtr(m.id)
	resp.HeartbeatIntervalMillis = int32(min(c.opts.heartbeatInterval.Milliseconds(), math.MaxInt32))
	a, sig := c.assignment(m.topics)
	if sig != m.assigned || m.epoch == 0 {
		m.assigned = sig
		if m.epoch == g.epoch {
			g.epoch++
		}
		m.epoch = g.epoch
		resp.Assignment = a
	}
	resp.MemberEpoch = m.epoch
	return errNone, ""
}

// assignment is every partition of each existing topic of topics, and a
// signature that changes when it does.
func (c *shareCoordinator) assignment(topics []string) (*kmsg.ShareGroupHeartbeatResponseAssignment, string) {
	a := kmsg.NewShareGroupHeartbeatResponseAssignment()
	a.TopicPartitions = []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}
	var sig strings.Builder
	for _, t := range topics {
		info, err := c.s.b.Topic(t)
		if err != nil {
			continue
		}
		tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
		tp.TopicID = topicID(info)
		for p := int32(0); p < info.Partitions; p++ {
			tp.Partitions = append(tp.Partitions, p)
		}
		a.TopicPartitions = append(a.TopicPartitions, tp)
		fmt.Fprintf(&sig, "%x:%d,", tp.TopicID, info.Partitions)
	}
	return &a, sig.String()
}

// memberCount is the number of members a share group has here, or -1
// when the coordinator does not know the group.
func (c *shareCoordinator) memberCount(groupName string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[groupName]
	if g == nil {
		return -1
	}
	return len(g.members)
}
