package console_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/client"
)

// Consuming as a consumer-group member from the console (docs/console.md,
// "Consume as a group member"): the guide's consumer-group walk-through
// (logctl consume orders --group billing --max 2, then again, then as
// analytics) done through the page, with the offsets and members checked
// through the API.

// ccStart is a node with the guide's orders: three partitions, created,
// paid and shipped in partition 1.
func ccStart(t *testing.T) *cgEnv {
	t.Helper()
	e := cgNode(t)
	if _, err := e.cl.CreateTopic(e.ctx, "orders", 3, nil); err != nil {
		t.Fatal(err)
	}
	ccProduce(t, e, "orders", 1, "created", "paid", "shipped")
	return e
}

func ccProduce(t *testing.T, e *cgEnv, topic string, partition int32, values ...string) {
	t.Helper()
	var recs []client.Record
	for _, v := range values {
		recs = append(recs, client.Record{Key: []byte("order-1"), Value: []byte(v), Partition: &partition})
	}
	if _, err := e.cl.Produce(e.ctx, topic, recs); err != nil {
		t.Fatal(err)
	}
}

// ccGroup returns a group's committed offsets by "topic/partition" (only
// those committed) and its members; a group that does not exist has
// neither.
func ccGroup(t *testing.T, e *cgEnv, group string) (map[string]int64, []string) {
	t.Helper()
	d, err := e.cl.DescribeGroup(e.ctx, group)
	if err != nil {
		if errors.Is(err, client.ErrUnknownGroup) {
			return map[string]int64{}, nil
		}
		t.Fatalf("describe group %s: %v", group, err)
	}
	offsets := map[string]int64{}
	for _, p := range d.Partitions {
		if p.Committed >= 0 {
			offsets[fmt.Sprintf("%s/%d", p.Topic, p.Partition)] = p.Committed
		}
	}
	var members []string
	for _, m := range d.Members {
		members = append(members, m.ID)
	}
	return offsets, members
}

// ccConsume submits the consume form and waits for its outcome; it
// returns the values shown, in order.
func ccConsume(p *page) []string {
	p.t.Helper()
	cgPoll(p, "the member name", `document.querySelector('#consume-member').textContent.startsWith('console/')`)
	p.click("#consume-submit")
	cgPoll(p, "the consume's outcome", `!!document.querySelector('#consume-outcome')`)
	var values []string
	p.eval(`[...document.querySelectorAll('#consume-records tbody tr')].filter(r => r.cells.length > 1).map(r => r.cells[5].textContent)`, &values)
	return values
}

// ccWantGroup checks a group's committed offsets and that it has no
// members left.
func ccWantGroup(t *testing.T, e *cgEnv, group string, want map[string]int64) {
	t.Helper()
	offsets, members := ccGroup(t, e, group)
	if len(members) > 0 {
		t.Errorf("group %s still has members %v: the page did not leave", group, members)
	}
	if len(offsets) != len(want) {
		t.Errorf("group %s committed %v, want %v", group, offsets, want)
		return
	}
	for k, v := range want {
		if offsets[k] != v {
			t.Errorf("group %s committed %v, want %v", group, offsets, want)
			return
		}
	}
}

func TestConsumeAsGroupMember(t *testing.T) {
	e := ccStart(t)
	p := newPage(t, e.node)

	// From the groups list, a group that does not exist yet.
	p.open("/groups")
	cgFill(p, "#groups-consume-name", "billing")
	p.click("#groups-consume-go")
	cgPoll(p, "billing's consume page", `location.hash === '#/groups/billing/consume' && !!document.querySelector('#consume-form')`)
	cgFill(p, "#consume-topics", "orders")
	cgFill(p, "#consume-max", "2")
	if got := ccConsume(p); strings.Join(got, ",") != "created,paid" {
		t.Fatalf("billing --max 2 showed %q, want created, paid (page: %q)", got, p.text("#consume-result"))
	}
	ccWantGroup(t, e, "billing", map[string]int64{"orders/1": 2})
	p.waitText("#consume-outcome", "Read 2 records from 1 partition")
	p.waitText("#consume-outcome", "committed orders/1 → 2")
	var member string
	p.eval(`document.querySelector('#consume-member').textContent`, &member)
	if !strings.HasPrefix(member, "console/User:ANONYMOUS/") {
		t.Errorf("member %q is not named after the console and the principal", member)
	}

	// On the group's page, commit off: a peek shows shipped and leaves
	// the offset where it was.
	p.open("/groups/billing")
	p.click("#group-consume summary")
	cgPoll(p, "the group's topics as the default", `document.querySelector('#consume-topics').value === 'orders'`)
	p.click("#consume-commit")
	if got := ccConsume(p); strings.Join(got, ",") != "shipped" {
		t.Fatalf("billing's peek showed %q, want shipped (page: %q)", got, p.text("#consume-result"))
	}
	ccWantGroup(t, e, "billing", map[string]int64{"orders/1": 2})
	p.waitText("#consume-outcome", "nothing committed (commit after reading is off)")
	var hash string
	p.eval(`location.hash`, &hash)
	if !strings.Contains(hash, "commit=0") || !strings.Contains(hash, "topics=orders") {
		t.Errorf("the consume's choices are not in the URL: %q", hash)
	}

	// Commit on: billing resumes at shipped and commits 3.
	p.click("#consume-commit")
	if got := ccConsume(p); strings.Join(got, ",") != "shipped" {
		t.Fatalf("billing resumed with %q, want shipped", got)
	}
	ccWantGroup(t, e, "billing", map[string]int64{"orders/1": 3})
	p.waitText("#consume-outcome", "committed orders/1 → 3")
	// Nothing left: a consume (not waiting) reads nothing and commits
	// nothing.
	cgFill(p, "#consume-wait", "0s")
	if got := ccConsume(p); len(got) != 0 {
		t.Fatalf("billing at the end read %q", got)
	}
	p.waitText("#consume-outcome", "Read 0 records")
	ccWantGroup(t, e, "billing", map[string]int64{"orders/1": 3})

	// analytics reads on its own offsets: all three (a shared link, with
	// the value shown as hex).
	p.open("/groups/analytics/consume?topics=orders")
	if got := ccConsume(p); strings.Join(got, ",") != "created,paid,shipped" {
		t.Fatalf("analytics showed %q, want created, paid, shipped", got)
	}
	p.click("#consume-view-hex")
	p.waitText("#consume-records", "63 72 65 61 74 65 64") // "created"
	ccWantGroup(t, e, "analytics", map[string]int64{"orders/1": 3})
	ccWantGroup(t, e, "billing", map[string]int64{"orders/1": 3})
}

func TestConsumeAsGroupRefused(t *testing.T) {
	e := ccStart(t)
	p := newPage(t, e.node)

	// A topic that does not exist: the join is refused, shown, and
	// nothing is committed.
	p.open("/groups/billing/consume?topics=nosuch")
	ccConsume(p)
	p.waitText("#consume-result", "not_found")
	p.waitText("#consume-outcome", "refused, nothing committed")
	cgTakeRefusal(p, "JoinGroup")
	ccWantGroup(t, e, "billing", map[string]int64{})

	// Bad input is refused by the form, before any call.
	cgFill(p, "#consume-topics", "orders")
	cgFill(p, "#consume-wait", "1m")
	p.click("#consume-submit")
	p.waitText("#consume-result", "invalid_argument")
	ccWantGroup(t, e, "billing", map[string]int64{})

	// A reset while the page's member waits for records fences it: the
	// records it read under the old generation are not committed (the
	// node refuses the fetch or the commit as stale), and it leaves.
	e.commit(t, "billing", map[int32]int64{1: 3}, false)
	if _, err := e.cl.CreateTopic(e.ctx, "payments", 1, nil); err != nil {
		t.Fatal(err)
	}
	p.open("/groups/billing/consume?topics=orders&wait=10s")
	cgPoll(p, "the member name", `document.querySelector('#consume-member').textContent.startsWith('console/')`)
	p.click("#consume-submit")
	// The member read what there was (nothing) and waits for more.
	p.waitText("#consume-running", "Waiting for records")
	if _, err := e.rpc.ResetGroupOffsets(e.ctx, connect.NewRequest(&logdv1.ResetGroupOffsetsRequest{
		Group: "billing", AllTopics: true, Strategy: "to-offset", Offset: 1, Execute: true})); err != nil {
		t.Fatal(err)
	}
	ccProduce(t, e, "orders", 1, "refunded")
	cgPoll(p, "the consume's outcome", `!!document.querySelector('#consume-outcome')`)
	ccWantGroup(t, e, "billing", map[string]int64{"orders/0": 0, "orders/1": 1, "orders/2": 0})
	p.waitText("#consume-result", "REASON_STALE_GENERATION")
	p.waitText("#consume-outcome", "refused, nothing committed")
	for _, msg := range p.takeErrors() {
		if !strings.Contains(msg, "/logd.v1.LogService/GroupFetch") && !strings.Contains(msg, "/logd.v1.LogService/CommitOffsets") {
			t.Errorf("the browser logged an error other than the fenced fetch or commit: %s", msg)
		}
	}

	// Leaving the page while the member waits leaves the group at once
	// (well before its session timeout would remove it).
	p.open("/groups/billing/consume?topics=payments&wait=10s")
	cgPoll(p, "the member name", `document.querySelector('#consume-member').textContent.startsWith('console/')`)
	p.click("#consume-submit")
	for deadline := time.Now().Add(pageTimeout); ; time.Sleep(20 * time.Millisecond) {
		if _, members := ccGroup(t, e, "billing"); len(members) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the page's member never joined")
		}
	}
	left := time.Now()
	var ok bool
	p.eval(`(() => { location.hash = '#/topics'; return true; })()`, &ok)
	for {
		_, members := ccGroup(t, e, "billing")
		if len(members) == 0 {
			break
		}
		if time.Since(left) > 5*time.Second {
			t.Fatalf("members %v 5s after the page was left (the session timeout is 10s): the page did not leave", members)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ccWantGroup(t, e, "billing", map[string]int64{"orders/0": 0, "orders/1": 1, "orders/2": 0})
}

func TestConsumeAsGroupWaitsForRelease(t *testing.T) {
	e := ccStart(t)
	ccProduce(t, e, "orders", 0, "p0")
	ccProduce(t, e, "orders", 2, "p2")
	// A live member owns every partition of orders; billing is at shipped
	// in partition 1 and has nothing committed in 0 and 2.
	e.commit(t, "billing", map[int32]int64{1: 2}, true)

	p := newPage(t, e.node)
	p.open("/groups/billing/consume?topics=orders&wait=10s&max=5")
	cgPoll(p, "the member name", `document.querySelector('#consume-member').textContent.startsWith('console/')`)
	p.click("#consume-submit")
	p.waitText("#consume-running", "Waiting for an assignment")

	// The page's member gets a partition only once the live member
	// released it (moves are cooperative): release the one the node
	// asks back.
	hb, err := e.rpc.GroupHeartbeat(e.ctx, connect.NewRequest(&logdv1.GroupHeartbeatRequest{Group: "billing", MemberId: "m-billing"}))
	if err != nil {
		t.Fatal(err)
	}
	revoke := hb.Msg.Assignment.Revoke
	if len(revoke) != 1 {
		t.Fatalf("the live member is asked to release %v, want one partition", revoke)
	}
	moved := revoke[0].Partition
	if _, err := e.rpc.GroupHeartbeat(e.ctx, connect.NewRequest(&logdv1.GroupHeartbeatRequest{Group: "billing", MemberId: "m-billing",
		Released: revoke})); err != nil {
		t.Fatal(err)
	}
	want := map[int32]string{0: "p0", 1: "shipped", 2: "p2"}[moved]
	cgPoll(p, "the consume's outcome", `!!document.querySelector('#consume-outcome')`)
	var values []string
	p.eval(`[...document.querySelectorAll('#consume-records tbody tr')].filter(r => r.cells.length > 1).map(r => r.cells[5].textContent)`, &values)
	if strings.Join(values, ",") != want {
		t.Fatalf("after orders/%d moved to the page's member it showed %q, want %s (page: %q)", moved, values, want, p.text("#consume-result"))
	}
	offsets, members := ccGroup(t, e, "billing")
	wantOffsets := map[string]int64{"orders/1": 2}
	wantOffsets[fmt.Sprintf("orders/%d", moved)]++
	if fmt.Sprint(offsets) != fmt.Sprint(wantOffsets) {
		t.Errorf("billing committed %v, want %v", offsets, wantOffsets)
	}
	if strings.Join(members, ",") != "m-billing" {
		t.Errorf("members %v, want the live member alone (the page left)", members)
	}
}

func TestConsumeAsGroupPermissionDenied(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node, admin, _ := authNode(t)
	c := dlqClient(t, node, admin)
	for _, topic := range []string{"orders", "payroll"} {
		if _, err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Produce(ctx, topic, []client.Record{{Value: []byte(topic + "-1")}}); err != nil {
			t.Fatal(err)
		}
	}
	// bob may read orders as billing, and not payroll.
	tok, err := c.CreateToken(ctx, client.CreateTokenRequest{Principal: "User:bob", Description: "console test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateACLs(ctx, []client.ACL{
		{Principal: "User:bob", Resource: "topic", Pattern: "literal", Name: "orders", Operation: "read", Effect: "allow"},
		{Principal: "User:bob", Resource: "group", Pattern: "literal", Name: "billing", Operation: "read", Effect: "allow"},
	}); err != nil {
		t.Fatal(err)
	}

	p := newPage(t, node)
	p.open("/groups/billing/consume?topics=payroll")
	authLogin(p, tok.Token)
	p.waitText("#whoami", "User:bob")
	p.takeRefusals("401")
	p.open("/groups/billing/consume?topics=payroll")
	var member string
	cgPoll(p, "the member name", `document.querySelector('#consume-member').textContent.startsWith('console/')`)
	p.eval(`document.querySelector('#consume-member').textContent`, &member)
	if !strings.HasPrefix(member, "console/User:bob/") {
		t.Errorf("member %q is not named after bob", member)
	}
	ccConsume(p)
	p.waitText("#consume-result", "permission_denied")
	p.waitText("#consume-outcome", "refused, nothing committed")
	p.takeRefusals("403")
	if _, err := c.DescribeGroup(ctx, "billing"); !errors.Is(err, client.ErrUnknownGroup) {
		t.Fatalf("billing after a refused consume: %v, want no group", err)
	}

	// The topic bob may read: read and committed, as bob's member.
	cgFill(p, "#consume-topics", "orders")
	if got := ccConsume(p); strings.Join(got, ",") != "orders-1" {
		t.Fatalf("bob's consume of orders showed %q (page: %q)", got, p.text("#consume-result"))
	}
	d, err := c.DescribeGroup(ctx, "billing")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Members) != 0 || len(d.Partitions) != 1 || d.Partitions[0].Committed != 1 {
		t.Fatalf("billing after bob's consume: members %v, partitions %+v; want none, orders/0 at 1", d.Members, d.Partitions)
	}
}
