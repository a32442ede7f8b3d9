package kafka

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logd-dev/logd/auth"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
)

// Tests of the group coordinator with raw requests, where each step's
// answer is known: the classic protocol's join phases, sessions, static
// members, fencing by resets, and protocol conflicts.

// member is one raw group member on its own connection.
type member struct {
	t                *testing.T
	c                *rawClient
	group, id        string
	instance         *string
	generation       int32
	leader, protocol string
	members          []kmsg.JoinGroupResponseMember
	// rebalance, if set, is the rebalance timeout it joins with (else its
	// session timeout).
	rebalance time.Duration
}

func newMember(t *testing.T, tn *testNode, groupID string) *member {
	return &member{t: t, c: dial(t, tn.addr), group: groupID}
}

func (m *member) joinRequest(session time.Duration, meta string) *kmsg.JoinGroupRequest {
	req := joinReq(9, m.group, m.id, session, "orders")
	req.Protocols[0].Metadata = append(req.Protocols[0].Metadata, meta...)
	req.InstanceID = m.instance
	if m.rebalance > 0 {
		req.RebalanceTimeoutMillis = int32(m.rebalance.Milliseconds())
	}
	return req
}

// join joins and waits for the end of the join phase.
func (m *member) join(meta string) int16 {
	m.t.Helper()
	return m.finishJoin(m.c.do(m.joinRequest(10*time.Second, meta)).(*kmsg.JoinGroupResponse), meta)
}

// startJoin sends a JoinGroup whose answer waits; finishJoin reads it.
func (m *member) startJoin(meta string) (kmsg.Request, int32) {
	req := m.joinRequest(10*time.Second, meta)
	return req, m.c.send(req)
}

func (m *member) finishJoin(resp *kmsg.JoinGroupResponse, meta string) int16 {
	m.t.Helper()
	if resp.ErrorCode == errMemberIDRequired {
		m.id = resp.MemberID
		return m.join(meta)
	}
	if resp.ErrorCode == errNone {
		m.id, m.generation, m.leader, m.protocol, m.members = resp.MemberID, resp.Generation, resp.LeaderID, *resp.Protocol, resp.Members
	}
	return resp.ErrorCode
}

func (m *member) syncRequest(plan map[string]string) *kmsg.SyncGroupRequest {
	req := kmsg.NewPtrSyncGroupRequest()
	req.SetVersion(5)
	req.Group, req.Generation, req.MemberID, req.InstanceID = m.group, m.generation, m.id, m.instance
	req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr(m.protocol)
	for id, a := range plan {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = id, []byte(a)
		req.GroupAssignment = append(req.GroupAssignment, ga)
	}
	return req
}

func (m *member) sync(plan map[string]string) (string, int16) {
	m.t.Helper()
	resp := m.c.do(m.syncRequest(plan)).(*kmsg.SyncGroupResponse)
	return string(resp.MemberAssignment), resp.ErrorCode
}

func (m *member) heartbeat() int16 {
	m.t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.SetVersion(4)
	req.Group, req.Generation, req.MemberID, req.InstanceID = m.group, m.generation, m.id, m.instance
	return m.c.do(req).(*kmsg.HeartbeatResponse).ErrorCode
}

func (m *member) commit(partition int32, offset int64) int16 {
	m.t.Helper()
	req := simpleCommit(9, m.group, "orders", partition, offset)
	req.Generation, req.MemberID, req.InstanceID = m.generation, m.id, m.instance
	return commitCode(m.t, m.c.do(req))
}

func (m *member) leave() int16 {
	m.t.Helper()
	req := kmsg.NewPtrLeaveGroupRequest()
	req.SetVersion(5)
	req.Group = m.group
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID, lm.InstanceID = m.id, m.instance
	req.Members = append(req.Members, lm)
	resp := m.c.do(req).(*kmsg.LeaveGroupResponse)
	return max(resp.ErrorCode, resp.Members[0].ErrorCode)
}

func wantCode(t *testing.T, what string, got, want int16) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: %s; want %s", what, errorName(got), errorName(want))
	}
}

// committed returns logd's committed offset of orders-p in a group.
func committed(t *testing.T, tn *testNode, groupID string, p int32) int64 {
	t.Helper()
	g, err := tn.backend.ConsumerGroup(groupID)
	if err != nil {
		return -1
	}
	tp, ok := g.Topics["orders"]
	if !ok {
		return -1
	}
	return tp.Partitions[p].Committed
}

// waitState waits until a group is in a state (a request sent on another
// connection has reached the coordinator).
func waitState(t *testing.T, tn *testNode, groupID string, want groupState) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := tn.srv.groups
		c.mu.Lock()
		g := c.groups[groupID]
		got := g != nil && g.state == want
		c.mu.Unlock()
		if got {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s not %s within 10s", groupID, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// groupNode starts a node with a quick coordinator and topic "orders" of
// 2 partitions holding 10 records each.
func groupNode(t *testing.T, opts ...func(*Options)) *testNode {
	t.Helper()
	tn := startNode(t, append([]func(*Options){fastGroups}, opts...)...)
	tn.createTopic("orders", 2, nil)
	c := dial(t, tn.addr)
	for p := range int32(2) {
		vals := make([]string, 10)
		for i := range vals {
			vals[i] = "v"
		}
		if code, _ := produceCode(t, c.do(produceReq(9, -1, "orders", p, records(t, vals...)))); code != 0 {
			t.Fatalf("produce: %s", errorName(code))
		}
	}
	return tn
}

// TestGroupRebalance walks a group through its states: a member joins
// (MEMBER_ID_REQUIRED first) and leads alone; a second member's join
// starts a join phase, which the first learns from its heartbeat and
// commits in; both join, the leader gets both subscriptions and hands out
// a plan, each member gets its part; a commit from the old generation is
// ILLEGAL_GENERATION; a member leaving starts another phase.
func TestGroupRebalance(t *testing.T) {
	tn := groupNode(t)
	a, b := newMember(t, tn, "g"), newMember(t, tn, "g")

	first := a.c.do(a.joinRequest(10*time.Second, "")).(*kmsg.JoinGroupResponse)
	wantCode(t, "a's first join", first.ErrorCode, errMemberIDRequired)
	wantCode(t, "a's join with its id", a.finishJoin(first, ""), errNone)
	if a.generation != 1 || a.leader != a.id || len(a.members) != 1 || a.protocol != "range" {
		t.Fatalf("a joined generation %d, leader %q, %d members, protocol %q", a.generation, a.leader, len(a.members), a.protocol)
	}
	got, code := a.sync(map[string]string{a.id: "a1"})
	wantCode(t, "a's sync", code, errNone)
	if got != "a1" {
		t.Fatalf("a's assignment %q", got)
	}
	wantCode(t, "a's heartbeat", a.heartbeat(), errNone)
	wantCode(t, "a's commit", a.commit(0, 3), errNone)

	first = b.c.do(b.joinRequest(10*time.Second, "b")).(*kmsg.JoinGroupResponse)
	wantCode(t, "b's first join", first.ErrorCode, errMemberIDRequired)
	b.id = first.MemberID
	bReq, bCorr := b.startJoin("b") // waits for a
	waitState(t, tn, "g", groupPreparingRebalance)

	wantCode(t, "a's heartbeat in the join phase", a.heartbeat(), errRebalanceInProgress)
	wantCode(t, "a's commit in the join phase", a.commit(0, 4), errNone)
	wantCode(t, "a's join", a.join(""), errNone)
	wantCode(t, "b's join", b.finishJoin(b.c.recv(bReq, bCorr).(*kmsg.JoinGroupResponse), "b"), errNone)
	if a.generation != 2 || b.generation != 2 || a.leader != a.id || b.leader != a.id || len(a.members) != 2 || len(b.members) != 0 {
		t.Fatalf("generation %d/%d, leader %q/%q, members %d/%d", a.generation, b.generation, a.leader, b.leader, len(a.members), len(b.members))
	}
	if string(a.members[1].ProtocolMetadata[len(a.members[1].ProtocolMetadata)-1:]) != "b" {
		t.Fatalf("the leader got b's subscription as %q", a.members[1].ProtocolMetadata)
	}
	wantCode(t, "b's commit before the plan", b.commit(1, 1), errRebalanceInProgress)
	syncB := b.syncRequest(nil)
	corr := b.c.send(syncB) // waits for the leader's plan
	got, code = a.sync(map[string]string{a.id: "a2", b.id: "b2"})
	wantCode(t, "a's sync", code, errNone)
	resp := b.c.recv(syncB, corr).(*kmsg.SyncGroupResponse)
	wantCode(t, "b's sync", resp.ErrorCode, errNone)
	if got != "a2" || string(resp.MemberAssignment) != "b2" {
		t.Fatalf("assignments %q and %q", got, resp.MemberAssignment)
	}
	wantCode(t, "b's commit", b.commit(1, 5), errNone)
	old := *a
	old.generation = 1
	wantCode(t, "a commit of generation 1", old.commit(0, 9), errIllegalGeneration)
	if off := committed(t, tn, "g", 0); off != 4 {
		t.Fatalf("orders-0 committed at %d; want 4", off)
	}
	if off := committed(t, tn, "g", 1); off != 5 {
		t.Fatalf("orders-1 committed at %d; want 5", off)
	}

	wantCode(t, "b leaves", b.leave(), errNone)
	wantCode(t, "a's heartbeat after b left", a.heartbeat(), errRebalanceInProgress)
	wantCode(t, "a joins again", a.join(""), errNone)
	if a.generation != 3 || len(a.members) != 1 {
		t.Fatalf("after b left: generation %d, %d members", a.generation, len(a.members))
	}
	wantCode(t, "b's heartbeat after it left", b.heartbeat(), errUnknownMemberID)
}

// TestGroupSessionExpiry: a member that stops heartbeating is removed
// after its session; the group is then empty, and a commit outside any
// generation, refused while it had a member, passes.
func TestGroupSessionExpiry(t *testing.T) {
	tn := groupNode(t)
	a := newMember(t, tn, "g")
	req := a.joinRequest(200*time.Millisecond, "")
	first := a.c.do(req).(*kmsg.JoinGroupResponse)
	a.id = first.MemberID
	req.MemberID = a.id
	wantCode(t, "join", a.finishJoin(a.c.do(req).(*kmsg.JoinGroupResponse), ""), errNone)
	if _, code := a.sync(map[string]string{a.id: "x"}); code != errNone {
		t.Fatalf("sync: %s", errorName(code))
	}
	c := dial(t, tn.addr)
	wantCode(t, "a simple commit while a member is in", commitCode(t, c.do(simpleCommit(9, "g", "orders", 0, 1))), errUnknownMemberID)
	deadline := time.Now().Add(10 * time.Second)
	for tn.srv.groups.busy("g") {
		if time.Now().After(deadline) {
			t.Fatal("the member was not expired within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantCode(t, "heartbeat after expiry", a.heartbeat(), errUnknownMemberID)
	wantCode(t, "a simple commit once empty", commitCode(t, c.do(simpleCommit(9, "g", "orders", 0, 1))), errNone)
}

// TestGroupStaticMember: a static member (instance id) joins without
// MEMBER_ID_REQUIRED; when its process restarts and joins again with the
// same instance id, it gets the current generation at once, with a new
// member id, and its assignment back without a rebalance; the previous
// incarnation is FENCED_INSTANCE_ID. A static member leaves by instance
// id.
func TestGroupStaticMember(t *testing.T) {
	tn := groupNode(t)
	a, other := newMember(t, tn, "g"), newMember(t, tn, "g")
	a.instance, other.instance = kmsg.StringPtr("host-a"), kmsg.StringPtr("host-b")
	wantCode(t, "a joins", a.join(""), errNone)
	if _, code := a.sync(map[string]string{a.id: "a1"}); code != errNone {
		t.Fatalf("sync: %s", errorName(code))
	}
	corr := other.c.send(other.joinRequest(10*time.Second, ""))
	waitState(t, tn, "g", groupPreparingRebalance)
	wantCode(t, "a's heartbeat", a.heartbeat(), errRebalanceInProgress)
	wantCode(t, "a joins again", a.join(""), errNone)
	wantCode(t, "b joins", other.finishJoin(other.c.recv(other.joinRequest(0, ""), corr).(*kmsg.JoinGroupResponse), ""), errNone)
	if _, code := a.sync(map[string]string{a.id: "a2", other.id: "b2"}); code != errNone {
		t.Fatalf("sync: %s", errorName(code))
	}
	if got, code := other.sync(nil); code != errNone || got != "b2" {
		t.Fatalf("b's sync: %q %s", got, errorName(code))
	}
	gen := a.generation

	restarted := newMember(t, tn, "g")
	restarted.instance = a.instance
	wantCode(t, "a's new process joins", restarted.join(""), errNone)
	// It led: version 9 tells it so, with the members, and to skip the
	// assignment (KIP-814).
	if restarted.generation != gen || restarted.id == a.id || restarted.leader != restarted.id || len(restarted.members) != 2 {
		t.Fatalf("restarted: generation %d (was %d), id %q (was %q), leader %q", restarted.generation, gen, restarted.id, a.id, restarted.leader)
	}
	if got, code := restarted.sync(nil); code != errNone || got != "a2" {
		t.Fatalf("restarted sync: %q %s", got, errorName(code))
	}
	wantCode(t, "the old process's heartbeat", a.heartbeat(), errFencedInstanceID)
	wantCode(t, "b's heartbeat", other.heartbeat(), errNone)
	wantCode(t, "b leaves by instance id", other.leave(), errNone)
	wantCode(t, "a's heartbeat", restarted.heartbeat(), errRebalanceInProgress)
}

// TestGroupResetFencesMembers: an offset reset (what `logctl group
// reset-offsets` proposes) fences the Kafka generation: a commit of the
// generation is ILLEGAL_GENERATION and leaves the reset offset in place,
// and so is the heartbeat; the member joins again and commits.
func TestGroupResetFencesMembers(t *testing.T) {
	tn := groupNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := newMember(t, tn, "g")
	wantCode(t, "join", a.join(""), errNone)
	if _, code := a.sync(map[string]string{a.id: "x"}); code != errNone {
		t.Fatalf("sync: %s", errorName(code))
	}
	wantCode(t, "commit", a.commit(0, 8), errNone)
	if err := tn.backend.ResetGroupOffsets(ctx, backend.GroupResetOffsets{Group: "g", Offsets: []group.OffsetCommit{
		{TopicPartition: group.TopicPartition{Topic: "orders", Partition: 0}, Offset: 2}}}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "commit after the reset", a.commit(0, 9), errIllegalGeneration)
	if off := committed(t, tn, "g", 0); off != 2 {
		t.Fatalf("orders-0 committed at %d after the reset; want 2", off)
	}
	wantCode(t, "heartbeat after the reset", a.heartbeat(), errIllegalGeneration)
	wantCode(t, "join again", a.join(""), errNone)
	if _, code := a.sync(map[string]string{a.id: "x"}); code != errNone {
		t.Fatalf("sync: %s", errorName(code))
	}
	wantCode(t, "commit in the new generation", a.commit(0, 3), errNone)
	if off := committed(t, tn, "g", 0); off != 3 {
		t.Fatalf("orders-0 committed at %d; want 3", off)
	}
}

// TestGroupResetDuringRebalance: a reset while members wait in JoinGroup
// (a cooperative member keeps its partitions and positions across the
// rebalance) fences the generation that forms: SyncGroup is
// ILLEGAL_GENERATION for every member, which then drops its partitions
// and joins again; the next generation is fine.
func TestGroupResetDuringRebalance(t *testing.T) {
	tn := groupNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, b := newMember(t, tn, "g"), newMember(t, tn, "g")
	wantCode(t, "a joins", a.join(""), errNone)
	if _, code := a.sync(map[string]string{a.id: "a1"}); code != errNone {
		t.Fatalf("sync: %s", errorName(code))
	}
	wantCode(t, "a commits", a.commit(0, 7), errNone)
	first := b.c.do(b.joinRequest(10*time.Second, "b")).(*kmsg.JoinGroupResponse)
	b.id = first.MemberID
	bReq, bCorr := b.startJoin("b")
	waitState(t, tn, "g", groupPreparingRebalance)
	if err := tn.backend.ResetGroupOffsets(ctx, backend.GroupResetOffsets{Group: "g", Offsets: []group.OffsetCommit{
		{TopicPartition: group.TopicPartition{Topic: "orders", Partition: 0}, Offset: 1}}}); err != nil {
		t.Fatal(err)
	}
	// a is between its heartbeats: it learns of the join phase only, and
	// joins keeping what it owns.
	wantCode(t, "a joins again", a.join(""), errNone)
	wantCode(t, "b joins", b.finishJoin(b.c.recv(bReq, bCorr).(*kmsg.JoinGroupResponse), "b"), errNone)
	_, code := a.sync(map[string]string{a.id: "a2", b.id: "b2"})
	wantCode(t, "a's sync in the fenced generation", code, errIllegalGeneration)
	_, code = b.sync(nil)
	wantCode(t, "b's sync in the fenced generation", code, errIllegalGeneration)
	if off := committed(t, tn, "g", 0); off != 1 {
		t.Fatalf("orders-0 committed at %d; want the reset's 1", off)
	}
	corr := b.c.send(b.joinRequest(10*time.Second, "b"))
	waitState(t, tn, "g", groupPreparingRebalance)
	wantCode(t, "a joins after the fence", a.join(""), errNone)
	wantCode(t, "b joins after the fence", b.finishJoin(b.c.recv(b.joinRequest(0, ""), corr).(*kmsg.JoinGroupResponse), "b"), errNone)
	corr = b.c.send(b.syncRequest(nil))
	if got, code := a.sync(map[string]string{a.id: "a3", b.id: "b3"}); code != errNone || got != "a3" {
		t.Fatalf("a's sync: %q %s", got, errorName(code))
	}
	if resp := b.c.recv(b.syncRequest(nil), corr).(*kmsg.SyncGroupResponse); resp.ErrorCode != errNone || string(resp.MemberAssignment) != "b3" {
		t.Fatalf("b's sync: %+v", resp)
	}
	wantCode(t, "a commits", a.commit(0, 2), errNone)
}

// TestGroupProtocolConflicts: a group held by live members of logd's own
// protocol refuses Kafka members (INCONSISTENT_GROUP_PROTOCOL) and
// commits outside a generation (UNKNOWN_MEMBER_ID); a logd member that
// joins a Kafka group fences its Kafka members, whose next join is
// refused; Kafka members without a common assignor are refused too.
func TestGroupProtocolConflicts(t *testing.T) {
	tn := groupNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := tn.backend.JoinGroup(ctx, backend.GroupJoin{Group: "logd", Member: "native", Topics: []string{"orders"}, SessionTimeoutMs: 10_000}); err != nil {
		t.Fatal(err)
	}
	k := newMember(t, tn, "logd")
	wantCode(t, "a Kafka join to a logd group", k.join(""), errInconsistentGroupProto)
	c := dial(t, tn.addr)
	wantCode(t, "a simple commit to a logd group", commitCode(t, c.do(simpleCommit(9, "logd", "orders", 0, 1))), errUnknownMemberID)

	a := newMember(t, tn, "kafka")
	wantCode(t, "a Kafka join", a.join(""), errNone)
	if _, code := a.sync(map[string]string{a.id: "x"}); code != errNone {
		t.Fatalf("sync: %s", errorName(code))
	}
	if _, err := tn.backend.JoinGroup(ctx, backend.GroupJoin{Group: "kafka", Member: "native", Topics: []string{"orders"}, SessionTimeoutMs: 10_000}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "the Kafka member's heartbeat", a.heartbeat(), errIllegalGeneration)
	wantCode(t, "the Kafka member joins again", a.join(""), errInconsistentGroupProto)

	x, y := newMember(t, tn, "mixed"), newMember(t, tn, "mixed")
	wantCode(t, "x joins", x.join(""), errNone)
	req := y.joinRequest(10*time.Second, "")
	req.Protocols[0].Name = "roundrobin"
	first := y.c.do(req).(*kmsg.JoinGroupResponse)
	req.MemberID = first.MemberID
	wantCode(t, "y joins with another assignor", y.c.do(req).(*kmsg.JoinGroupResponse).ErrorCode, errInconsistentGroupProto)
}

// leadership is a backend whose leadership and term a test sets.
type leadership struct {
	backend.Kafka
	leads atomic.Bool
	term  atomic.Uint64
}

func (b *leadership) IsLeader() bool { return b.leads.Load() && b.Kafka.IsLeader() }

func (b *leadership) LeadsPartition(topic string, p int32) bool {
	return b.leads.Load() && b.Kafka.LeadsPartition(topic, p)
}

func (b *leadership) Status() backend.Status {
	st := b.Kafka.Status()
	st.Term = b.term.Load()
	return st
}

func (b *leadership) LeadsGroup(ctx context.Context, name string, place bool) (bool, uint64) {
	leads, _ := b.Kafka.LeadsGroup(ctx, name, place)
	return leads && b.leads.Load(), b.term.Load()
}

// TestGroupCoordinatorMoves: a node that stops leading answers every
// group request NOT_COORDINATOR and forgets its groups (their offsets are
// replicated); leading again, in a new term, it knows no member, which
// then joins again.
func TestGroupCoordinatorMoves(t *testing.T) {
	var lb *leadership
	tn := groupNode(t, func(o *Options) {
		lb = &leadership{Kafka: o.Backend}
		lb.leads.Store(true)
		lb.term.Store(1)
		o.Backend = lb
	})
	a := newMember(t, tn, "g")
	wantCode(t, "join", a.join(""), errNone)
	if _, code := a.sync(map[string]string{a.id: "x"}); code != errNone {
		t.Fatalf("sync: %s", errorName(code))
	}
	wantCode(t, "commit", a.commit(1, 6), errNone)

	lb.leads.Store(false)
	wantCode(t, "heartbeat on a follower", a.heartbeat(), errNotCoordinator)
	wantCode(t, "commit on a follower", a.commit(1, 7), errNotCoordinator)
	_, code := fetchedOffset(t, a.c.do(fetchOffsetReq(9, "g", "orders", 1)))
	wantCode(t, "offset fetch on a follower", code, errNotCoordinator)
	if tn.srv.groups.busy("g") {
		t.Fatal("a follower keeps its groups")
	}

	lb.term.Store(2)
	lb.leads.Store(true)
	wantCode(t, "heartbeat on the new coordinator", a.heartbeat(), errUnknownMemberID)
	off, code := fetchedOffset(t, a.c.do(fetchOffsetReq(9, "g", "orders", 1)))
	if code != errNone || off != 6 {
		t.Fatalf("offset on the new coordinator: %d %s; want 6", off, errorName(code))
	}
	a.id = ""
	wantCode(t, "join again", a.join(""), errNone)
}

// TestGroupPhaseDeadlines: a join phase ends at the members' rebalance
// timeout without the member that did not join again (though it
// heartbeats); a generation whose leader does not bring a plan within the
// rebalance timeout ends without the leader, and the members that synced
// are told to join again.
func TestGroupPhaseDeadlines(t *testing.T) {
	tn := groupNode(t)
	a, b, c := newMember(t, tn, "g"), newMember(t, tn, "g"), newMember(t, tn, "g")
	for _, m := range []*member{a, b, c} {
		m.rebalance = 300 * time.Millisecond
	}
	wantCode(t, "a joins", a.join(""), errNone)
	if _, code := a.sync(map[string]string{a.id: "a1"}); code != errNone {
		t.Fatalf("sync: %s", errorName(code))
	}
	resp := b.c.do(b.joinRequest(10*time.Second, "")).(*kmsg.JoinGroupResponse)
	wantCode(t, "b's first join", resp.ErrorCode, errMemberIDRequired)
	b.id = resp.MemberID
	start := time.Now()
	corr := b.c.send(b.joinRequest(10*time.Second, ""))
	waitState(t, tn, "g", groupPreparingRebalance)
	wantCode(t, "a heartbeats but does not join", a.heartbeat(), errRebalanceInProgress)
	wantCode(t, "b joins", b.finishJoin(b.c.recv(b.joinRequest(0, ""), corr).(*kmsg.JoinGroupResponse), ""), errNone)
	if b.leader != b.id || len(b.members) != 1 {
		t.Fatalf("after the phase's deadline: leader %q, %d members; want b alone", b.leader, len(b.members))
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("the join phase ended after %v, before its deadline", d)
	}
	wantCode(t, "a's heartbeat after the phase", a.heartbeat(), errUnknownMemberID)

	// b leads and never syncs; c's sync waits, and is told to join again.
	wantCode(t, "b syncs", func() int16 { _, code := b.sync(map[string]string{b.id: "b1"}); return code }(), errNone)
	c.id = c.c.do(c.joinRequest(10*time.Second, "")).(*kmsg.JoinGroupResponse).MemberID
	corr = c.c.send(c.joinRequest(10*time.Second, ""))
	waitState(t, tn, "g", groupPreparingRebalance)
	wantCode(t, "b joins again", b.join(""), errNone)
	wantCode(t, "c joins", c.finishJoin(c.c.recv(c.joinRequest(0, ""), corr).(*kmsg.JoinGroupResponse), ""), errNone)
	_, code := c.sync(nil)
	wantCode(t, "c's sync without the leader's plan", code, errRebalanceInProgress)
	wantCode(t, "b's heartbeat after its generation ended", b.heartbeat(), errUnknownMemberID)
}

// TestGroupAuthz: with permission checks on, a principal uses only the
// groups and topics its ACLs allow: a group it may not read refuses
// FindCoordinator, JoinGroup and commits (GROUP_AUTHORIZATION_FAILED), a
// topic it may not read refuses its part of a commit only
// (TOPIC_AUTHORIZATION_FAILED, nothing committed for it), OffsetFetch
// leaves unreadable topics out, ListGroups lists the groups it may
// describe, and DeleteGroups is audited, allowed or not.
func TestGroupAuthz(t *testing.T) {
	sn := startSecureNode(t, fastGroups)
	sn.createTopic("open", 1, nil)
	sn.createTopic("secret", 1, nil)
	sn.grant("User:alice", "open", auth.OpRead, auth.OpWrite)
	var acls []auth.ACL
	for _, op := range []auth.Operation{auth.OpRead, auth.OpDescribe} {
		acls = append(acls, auth.ACL{Principal: "User:alice", Resource: auth.ResourceGroup, Pattern: auth.PatternLiteral, Name: "mine", Operation: op, Effect: auth.Allow})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := sn.backend.CreateACLs(ctx, acls); err != nil {
		t.Fatal(err)
	}
	admin := sn.dialAs("admin")
	for _, topic := range []string{"open", "secret"} {
		if code, _ := produceCode(t, admin.do(produceReq(9, -1, topic, 0, records(t, "a", "b")))); code != 0 {
			t.Fatalf("produce to %s: %s", topic, errorName(code))
		}
	}
	wantCode(t, "admin's commit to theirs", commitCode(t, admin.do(simpleCommit(9, "theirs", "open", 0, 1))), errNone)
	c := sn.dialAs("alice")

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(4)
	fc.CoordinatorKeys = []string{"mine", "theirs"}
	if r := c.do(fc).(*kmsg.FindCoordinatorResponse); r.Coordinators[0].ErrorCode != 0 || r.Coordinators[1].ErrorCode != errGroupAuthorizationFailed {
		t.Errorf("find coordinator of mine, theirs: %+v", r.Coordinators)
	}
	wantCode(t, "join theirs", c.do(joinReq(9, "theirs", "", 10*time.Second, "open")).(*kmsg.JoinGroupResponse).ErrorCode, errGroupAuthorizationFailed)
	wantCode(t, "commit to theirs", commitCode(t, c.do(simpleCommit(9, "theirs", "open", 0, 1))), errGroupAuthorizationFailed)

	req := simpleCommit(9, "mine", "open", 0, 2)
	req.Topics = append(req.Topics, simpleCommit(9, "mine", "secret", 0, 2).Topics[0])
	r := c.do(req).(*kmsg.OffsetCommitResponse)
	if r.Topics[0].Partitions[0].ErrorCode != 0 || r.Topics[1].Partitions[0].ErrorCode != errTopicAuthorizationFailed {
		t.Fatalf("commit of open and secret: %+v", r.Topics)
	}
	g, err := sn.backend.ConsumerGroup("mine")
	if err != nil || g.Topics["open"].Partitions[0].Committed != 2 || g.Topics["secret"] != nil {
		t.Fatalf("mine after the commit: %+v %v", g, err)
	}
	wantCode(t, "admin's commit of secret to mine", commitCode(t, admin.do(simpleCommit(9, "mine", "secret", 0, 2))), errNone)
	all := kmsg.NewPtrOffsetFetchRequest()
	all.SetVersion(7)
	all.Group = "mine"
	if fr := c.do(all).(*kmsg.OffsetFetchResponse); fr.ErrorCode != 0 || len(fr.Topics) != 1 || fr.Topics[0].Topic != "open" {
		t.Errorf("alice's offsets of every topic of mine: %+v", fr)
	}
	if _, code := fetchedOffset(t, c.do(fetchOffsetReq(9, "mine", "secret", 0))); code != errTopicAuthorizationFailed {
		t.Errorf("alice's offset of secret: %s", errorName(code))
	}
	if _, code := fetchedOffset(t, c.do(fetchOffsetReq(9, "theirs", "open", 0))); code != errGroupAuthorizationFailed {
		t.Errorf("alice's offsets of theirs: %s", errorName(code))
	}

	lg := kmsg.NewPtrListGroupsRequest()
	lg.SetVersion(5)
	var listed []string
	for _, g := range c.do(lg).(*kmsg.ListGroupsResponse).Groups {
		listed = append(listed, g.Group)
	}
	if !slices.Equal(listed, []string{"mine"}) {
		t.Errorf("alice lists %q; want mine", listed)
	}
	// An internal group (a redrive job's position) is not listed, even to
	// a principal that may describe every group.
	internal := group.RedrivePrefix + "1"
	wantCode(t, "admin's commit to an internal group", commitCode(t, admin.do(simpleCommit(9, internal, "open", 0, 1))), errNone)
	listed = listed[:0]
	for _, g := range admin.do(lg).(*kmsg.ListGroupsResponse).Groups {
		listed = append(listed, g.Group)
	}
	if !slices.Equal(listed, []string{"mine", "theirs"}) {
		t.Errorf("admin lists %q; want mine, theirs (not %s)", listed, internal)
	}
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.SetVersion(2)
	dg.Groups = []string{"mine"}
	if r := c.do(dg).(*kmsg.DeleteGroupsResponse); r.Groups[0].ErrorCode != errGroupAuthorizationFailed {
		t.Errorf("alice's delete of mine: %s", errorName(r.Groups[0].ErrorCode))
	}
	if r := admin.do(dg).(*kmsg.DeleteGroupsResponse); r.Groups[0].ErrorCode != 0 {
		t.Errorf("admin's delete of mine: %s", errorName(r.Groups[0].ErrorCode))
	}
	log := sn.audit.String()
	for _, want := range []string{
		`"procedure":"kafka/DeleteGroups","principal":"User:alice","auth":"certificate"`,
		`"request":{"group":"mine"},"outcome":"group_authorization_failed"`,
		`"procedure":"kafka/DeleteGroups","principal":"User:admin"`,
		`"request":{"group":"mine"},"outcome":"ok"`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("audit log lacks %s:\n%s", want, log)
		}
	}
}

// TestDeleteGroupWithKafkaMembers: with the coordinator's members told to
// the backend (Server.GroupMembers, as cmd/logd wires it), the backend's
// DeleteGroup, which `logctl group delete` reaches, refuses a group Kafka
// members hold, as Kafka's NON_EMPTY_GROUP, and deletes it once they
// left.
func TestDeleteGroupWithKafkaMembers(t *testing.T) {
	tn := groupNode(t)
	tn.backend.SetExternalGroupMembers(tn.srv.GroupMembers)
	m := newMember(t, tn, "held")
	wantCode(t, "join", m.join(""), errNone)
	_, code := m.sync(map[string]string{m.id: ""})
	wantCode(t, "sync", code, errNone)
	wantCode(t, "commit", m.commit(0, 3), errNone)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if g := tn.srv.GroupMembers("held"); len(g.Members) != 1 || g.State != "stable" || g.Members[0].MemberID != m.id || g.Members[0].Protocol != "kafka" || g.Members[0].ClientHost == "" {
		t.Fatalf("the coordinator's group %+v; want stable with the one member, protocol kafka, and its host", g)
	}
	if err := tn.backend.DeleteGroup(ctx, "held"); !errors.Is(err, group.ErrConsumerGroupNotEmpty) {
		t.Fatalf("delete of a group with a Kafka member: %v, want %v", err, group.ErrConsumerGroupNotEmpty)
	}
	if got := committed(t, tn, "held", 0); got != 3 {
		t.Fatalf("committed offset %d after a refused delete, want 3", got)
	}
	wantCode(t, "leave", m.leave(), errNone)
	if err := tn.backend.DeleteGroup(ctx, "held"); err != nil {
		t.Fatalf("delete once the member left: %v", err)
	}
}

// TestGroupMembersGenerations: the coordinator's group, as describe shows
// it, carries its generation and how many generations with members it
// formed (the replicated group knows neither for Kafka members).
func TestGroupMembersGenerations(t *testing.T) {
	tn := groupNode(t)
	m := newMember(t, tn, "gens")
	for round := 1; round <= 3; round++ {
		wantCode(t, "join", m.join(""), errNone)
		_, code := m.sync(map[string]string{m.id: ""})
		wantCode(t, "sync", code, errNone)
		g := tn.srv.GroupMembers("gens")
		if g.Generation != int64(m.generation) || g.Rebalances != int64(round) || g.State != "stable" {
			t.Fatalf("after join %d: generation %d, rebalances %d, state %q; want generation %d (the member's), %d rebalances, stable",
				round, g.Generation, g.Rebalances, g.State, m.generation, round)
		}
	}
}
