package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
)

// The consumer groups pages (docs/console.md, "Consumer groups" and
// "Offset reset"), against a real node; outcomes are checked through the
// API.

// cgEnv is a node with a topic "orders" of two partitions holding 10
// records in partition 0 and 5 in partition 1.
type cgEnv struct {
	node *logdtest.Server
	cl   *client.Client
	rpc  logdv1connect.LogServiceClient
	ctx  context.Context
}

// cgNode is a fresh node with a client and an API client on it, and a
// context that ends with the test (at the latest after a minute).
func cgNode(t *testing.T) *cgEnv {
	t.Helper()
	node := logdtest.Start(t, logdtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cl, err := client.New(node.URL(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	e := &cgEnv{node: node, cl: cl, rpc: logdv1connect.NewLogServiceClient(http.DefaultClient, node.URL()), ctx: ctx}
	return e
}

func cgStart(t *testing.T) *cgEnv {
	t.Helper()
	e := cgNode(t)
	ctx, cl := e.ctx, e.cl
	if _, err := cl.CreateTopic(ctx, "orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	for p, n := range map[int32]int{0: 10, 1: 5} {
		var recs []client.Record
		for i := range n {
			recs = append(recs, client.Record{Value: fmt.Appendf(nil, "order-%d-%d", p, i), Partition: &p})
		}
		if _, err := cl.Produce(ctx, "orders", recs); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// commit makes group commit offsets of orders through a member that joins
// and, unless stay, leaves again (the group then has no members).
func (e *cgEnv) commit(t *testing.T, group string, offsets map[int32]int64, stay bool) {
	t.Helper()
	member := "m-" + group
	join, err := e.rpc.JoinGroup(e.ctx, connect.NewRequest(&logdv1.JoinGroupRequest{Group: group, MemberId: member, Topics: []string{"orders"},
		SessionTimeoutMs: 60_000}))
	if err != nil {
		t.Fatal(err)
	}
	var os []*logdv1.GroupOffset
	for p, o := range offsets {
		os = append(os, &logdv1.GroupOffset{Topic: "orders", Partition: p, Offset: o})
	}
	if _, err := e.rpc.CommitOffsets(e.ctx, connect.NewRequest(&logdv1.CommitOffsetsRequest{Group: group, MemberId: member,
		Generation: join.Msg.Assignment.Generation, Offsets: os})); err != nil {
		t.Fatal(err)
	}
	if !stay {
		e.leave(t, group)
	}
}

func (e *cgEnv) leave(t *testing.T, group string) {
	t.Helper()
	if _, err := e.rpc.LeaveGroup(e.ctx, connect.NewRequest(&logdv1.LeaveGroupRequest{Group: group, MemberId: "m-" + group})); err != nil {
		t.Fatal(err)
	}
}

// committed returns a group's committed offsets of orders by partition.
func (e *cgEnv) committed(t *testing.T, group string) map[int32]int64 {
	t.Helper()
	d, err := e.cl.DescribeGroup(e.ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, p := range d.Partitions {
		out[p.Partition] = p.Committed
	}
	return out
}

// cgPoll waits until the JavaScript expression js is true.
func cgPoll(p *page, what, js string) {
	p.t.Helper()
	if err := p.run(pollJS(js)); err != nil {
		p.t.Fatalf("wait for %s: %v (page text: %q)", what, err, p.text("#view"))
	}
}

// cgFill sets an input's value and fires its input event, as typing
// would. (page.fill's chromedp.SetValue with an empty value fails with
// "could not set value on node" under this chromedp and Chromium.)
func cgFill(p *page, sel, value string) {
	p.t.Helper()
	var ok bool
	p.eval(fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.focus(); e.value = %q;
		e.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`, sel, value), &ok)
	if !ok {
		p.t.Fatalf("fill %s: no such element (page text: %q)", sel, p.text("#view"))
	}
}

// cgTakeRefusal takes the errors the browser logged for a call the API
// refused, as the test meant it to, and fails on any other error.
func cgTakeRefusal(p *page, method string) {
	p.t.Helper()
	errs := p.takeErrors()
	if len(errs) == 0 {
		p.t.Errorf("no refusal of %s logged", method)
	}
	for _, e := range errs {
		if !strings.Contains(e, "/logd.v1.LogService/"+method) {
			p.t.Errorf("the browser logged an error other than the refusal of %s: %s", method, e)
		}
	}
}

// cgSelect chooses value in the select sel, firing its change event.
func cgSelect(p *page, sel, value string) {
	p.t.Helper()
	var ok bool
	p.eval(fmt.Sprintf(`(() => { const s = document.querySelector(%q); if (!s) return false; s.value = %q;
		s.dispatchEvent(new Event('change', {bubbles: true})); return s.value === %q; })()`, sel, value, value), &ok)
	if !ok {
		p.t.Fatalf("select %s in %s: no such element or option", value, sel)
	}
}

// cgConfirm types name into the open confirmation dialog and confirms.
func cgConfirm(p *page, name string) {
	p.t.Helper()
	cgFill(p, "#confirm-input", name)
	p.click("#confirm-ok")
}

func TestGroupsListPageAndDelete(t *testing.T) {
	e := cgStart(t)
	e.commit(t, "billing", map[int32]int64{0: 4, 1: 5}, false)
	e.commit(t, "analytics", map[int32]int64{0: 10}, true)
	groups, err := e.rpc.ListGroups(e.ctx, connect.NewRequest(&logdv1.ListGroupsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var lag int64
	for _, g := range groups.Msg.Groups {
		if g.Group == "billing" {
			lag = g.LagRecords
		}
	}
	if lag != 6 {
		t.Fatalf("billing lags %d records through the API, want 6", lag)
	}

	p := newPage(t, e.node)
	p.open("/groups")
	p.waitText("#groups-table", "billing")
	p.waitText("#groups-table", "analytics")
	cgPoll(p, "billing's lag of 6", `[...document.querySelectorAll('#groups-table tbody tr')].some(r => r.cells[0].textContent === 'billing' && r.cells[5].textContent === '6')`)
	cgFill(p, "#groups-filter", "bill")
	cgPoll(p, "the filter", `document.querySelectorAll('#groups-table tbody tr').length === 1`)
	if !strings.Contains(p.text("#groups-table"), "billing") {
		t.Errorf("the filter left %q", p.text("#groups-table"))
	}
	var hash string
	p.eval(`location.hash`, &hash)
	if hash != "#/groups?q=bill" {
		t.Errorf("the filter is not in the URL: %q", hash)
	}

	// A group's page: members, offsets and lag, and the lag chart after
	// a few updates.
	p.open("/groups/analytics")
	p.waitText("#group-members", "m-analytics")
	p.waitText("#group-members", "orders:0")
	p.waitText("#group-partitions", "orders")
	p.waitText("#group-summary", "5 records") // partition 1: nothing committed, 5 records
	// Two charts (records, time), each with the group's line and that of
	// the one lagging partition.
	cgPoll(p, "the lag charts", `document.querySelectorAll('#group-lag-chart svg.chart polyline').length === 4`)
	p.waitText("#group-lag-chart .legend", "orders:1")
	// Lag in time in human units, the raw value on hover.
	var raws []string
	p.eval(`Array.from(document.querySelectorAll('#group-partitions td .human, #group-summary .human')).map(e => e.title)`, &raws)
	if len(raws) == 0 {
		t.Errorf("no lag time shows its raw value on hover: %q", p.text("#group-partitions"))
	}
	for _, r := range raws {
		if !strings.HasSuffix(r, " ms") {
			t.Errorf("a lag time's raw value on hover is %q, want N ms", r)
		}
	}
	// Delete is set apart from Reset offsets, at the end of the page.
	if n := p.count(".actions #group-delete"); n != 0 {
		t.Error("Delete group sits beside Reset offsets")
	}
	p.waitText("#group-danger", "Delete group")

	// Delete is refused while the group has a member, and the page says why.
	p.click("#group-delete")
	cgConfirm(p, "analytics")
	p.waitText("#group-action-result", "failed_precondition")
	cgTakeRefusal(p, "DeleteGroup")
	if _, err := e.cl.DescribeGroup(e.ctx, "analytics"); err != nil {
		t.Fatalf("the refused delete removed the group: %v", err)
	}
	// Once the member has left, the delete goes through.
	e.leave(t, "analytics")
	p.click("#group-delete")
	cgConfirm(p, "analytics")
	cgPoll(p, "the list after the delete", `location.hash === '#/groups' && !!document.querySelector('#groups-table')`)
	groups, err = e.rpc.ListGroups(e.ctx, connect.NewRequest(&logdv1.ListGroupsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.Msg.Groups {
		if g.Group == "analytics" {
			t.Fatal("analytics is still listed after the delete")
		}
	}
}

func TestGroupOffsetResetPlanThenExecute(t *testing.T) {
	e := cgStart(t)
	e.commit(t, "billing", map[int32]int64{0: 4, 1: 5}, false)

	// The URL carries the target: a shared link opens the same form.
	p := newPage(t, e.node)
	p.open("/groups/billing/reset?strategy=to-offset&offset=2&topics=orders:0")
	cgPoll(p, "the reset form", `!!document.querySelector('#reset-all-topics')`)
	var form struct {
		Strategy, Offset, Topics string
		All                      bool
	}
	p.eval(`({Strategy: document.querySelector('#reset-strategy').value, Offset: document.querySelector('#reset-offset').value,
		Topics: document.querySelector('#reset-topics').value, All: document.querySelector('#reset-all-topics').checked})`, &form)
	if form.Strategy != "to-offset" || form.Offset != "2" || form.Topics != "orders:0" || form.All {
		t.Fatalf("the form from the URL: %+v", form)
	}
	p.click("#reset-plan-btn")
	p.waitText("#reset-plan", "Plan")
	cgPoll(p, "the plan row", `(() => { const r = document.querySelectorAll('#reset-plan tbody tr'); return r.length === 1 &&
		[...r[0].cells].map(c => c.textContent).join('|') === 'orders|0|4|2|6|8|'; })()`)
	// A plan changes nothing.
	if got := e.committed(t, "billing"); got[0] != 4 || got[1] != 5 {
		t.Fatalf("the plan changed the offsets: %v", got)
	}

	// A changed target withdraws the plan: Execute cannot apply a plan
	// that is not on the screen.
	cgFill(p, "#reset-offset", "3")
	var disabled bool
	p.eval(`document.querySelector('#reset-execute').disabled`, &disabled)
	if !disabled {
		t.Fatal("Execute is enabled after the target changed")
	}
	var hash string
	p.eval(`location.hash`, &hash)
	if !strings.Contains(hash, "offset=3") || !strings.Contains(hash, "strategy=to-offset") {
		t.Errorf("the URL does not follow the form: %q", hash)
	}
	p.click("#reset-plan-btn")
	cgPoll(p, "the new plan", `(() => { const r = document.querySelectorAll('#reset-plan tbody tr'); return r.length === 1 && r[0].cells[3].textContent === '3'; })()`)

	// Cancelling the confirmation changes nothing either.
	p.click("#reset-execute")
	p.click("#confirm-cancel")
	if got := e.committed(t, "billing"); got[0] != 4 {
		t.Fatalf("a cancelled execute changed the offsets: %v", got)
	}

	p.click("#reset-execute")
	cgConfirm(p, "billing")
	p.waitText("#reset-result", "Reset applied to 1 partition(s)")
	if got := e.committed(t, "billing"); got[0] != 3 || got[1] != 5 {
		t.Fatalf("offsets after the reset: %v, want partition 0 at 3 and 1 unchanged at 5", got)
	}

	// Every logctl target is offered; to-earliest over all topics plans
	// both partitions.
	var targets []string
	p.eval(`[...document.querySelectorAll('#reset-strategy option')].map(o => o.value)`, &targets)
	if strings.Join(targets, " ") != "to-earliest to-latest to-offset to-datetime by-duration shift-by from-plan" {
		t.Errorf("targets %v", targets)
	}
	cgSelect(p, "#reset-strategy", "shift-by")
	cgFill(p, "#reset-shift", "-2")
	p.click("#reset-all-topics")
	p.click("#reset-plan-btn")
	cgPoll(p, "the shift plan", `(() => { const r = document.querySelectorAll('#reset-plan tbody tr'); return r.length === 2 &&
		r[0].cells[3].textContent === '1' && r[1].cells[3].textContent === '3'; })()`)

	// The plan as JSON (logctl's -o json form) plans the same offsets
	// when pasted back, as logctl's --from-file applies it.
	var saved string
	p.eval(`document.querySelector('#reset-plan-json').textContent`, &saved)
	cgSelect(p, "#reset-strategy", "from-plan")
	cgFill(p, "#reset-plan-input", saved)
	p.click("#reset-plan-btn")
	cgPoll(p, "the plan from JSON", `(() => { const r = document.querySelectorAll('#reset-plan tbody tr'); return r.length === 2 &&
		r[0].cells[3].textContent === '1' && r[1].cells[3].textContent === '3'; })()`)
	// By duration: every record is younger than an hour, so the log start.
	cgSelect(p, "#reset-strategy", "by-duration")
	cgFill(p, "#reset-duration", "1h")
	p.click("#reset-plan-btn")
	cgPoll(p, "the duration plan", `(() => { const r = document.querySelectorAll('#reset-plan tbody tr'); return r.length === 2 &&
		r[0].cells[3].textContent === '0' && r[1].cells[3].textContent === '0'; })()`)
	if got := e.committed(t, "billing"); got[0] != 3 || got[1] != 5 {
		t.Fatalf("the plans changed the offsets: %v", got)
	}
}
