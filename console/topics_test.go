package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/logdtest"
	"github.com/logd-dev/logd/server"
)

// The cluster, topics and records pages (docs/console.md). Each test puts
// its data in its own node through the Connect API and checks what the
// page changed through the API too.

// tpAPI is a Connect client of node's API.
func tpAPI(node *logdtest.Server) logdv1connect.LogServiceClient {
	return logdv1connect.NewLogServiceClient(http.DefaultClient, node.URL())
}

// tpCreate creates a topic or fails the test.
func tpCreate(t *testing.T, api logdv1connect.LogServiceClient, name string, partitions int32, config map[string]string) {
	t.Helper()
	if _, err := api.CreateTopic(t.Context(), connect.NewRequest(&logdv1.CreateTopicRequest{Name: name, Partitions: partitions, Config: config})); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
}

// tpProduce appends records to a topic's partition in one call and
// returns the offset of the first.
func tpProduce(t *testing.T, api logdv1connect.LogServiceClient, topic string, partition int32, recs ...*logdv1.Record) int64 {
	t.Helper()
	for _, r := range recs {
		r.Partition = &partition
	}
	resp, err := api.Produce(t.Context(), connect.NewRequest(&logdv1.ProduceRequest{Topic: topic, Records: recs}))
	if err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	return resp.Msg.Results[0].Offset
}

// tpValues are records of these values, without keys.
func tpValues(values ...string) []*logdv1.Record {
	var recs []*logdv1.Record
	for _, v := range values {
		recs = append(recs, &logdv1.Record{Value: []byte(v)})
	}
	return recs
}

// tpDescribe returns a topic as the API describes it.
func tpDescribe(t *testing.T, api logdv1connect.LogServiceClient, name string) (*logdv1.DescribeTopicResponse, error) {
	t.Helper()
	resp, err := api.DescribeTopic(t.Context(), connect.NewRequest(&logdv1.DescribeTopicRequest{Name: name}))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// tpWait polls cond (every 20 ms, up to the page timeout) until it
// holds, failing the test with what otherwise.
func tpWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(pageTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tpHash is the page's hash route.
func tpHash(p *page) string {
	var h string
	p.eval(`location.hash`, &h)
	return h
}

func TestClusterPageShowsHealth(t *testing.T) {
	node := logdtest.Start(t, logdtest.Options{})
	p := newPage(t, node)
	p.open("/cluster")
	p.waitText("#cluster-health", "Leader known: node-1")
	for _, want := range []string{"Ready", "No followers (a single node)", "% free"} {
		p.waitText("#cluster-health", want)
	}
	p.waitText("#cluster-summary", "1 leader change seen")
	p.waitText("#cluster-summary", "Disk")
	// The feature level in words, not "build N, applied M".
	p.waitText("#feature-level-text", "The cluster may use every feature up to level ")
	// The header's clock is UTC, as every other time.
	p.waitText("#live", " UTC")
	if n := p.count(`#cluster-health li[data-level="bad"]`); n != 0 {
		t.Errorf("%d failed health checks on a healthy node: %q", n, p.text("#cluster-health"))
	}
	// A leader has no follower note; the members table has the lag columns.
	if n := p.count("#cluster-note p"); n != 0 {
		t.Errorf("the leader shows the follower note: %q", p.text("#cluster-note"))
	}
	p.waitText("#cluster-members", "Lag (entries)")
}

func TestTopicsPageListsTopicsAndPartitions(t *testing.T) {
	node := logdtest.Start(t, logdtest.Options{})
	api := tpAPI(node)
	tpCreate(t, api, "orders", 3, map[string]string{"retention.ms": "86400000"})
	tpCreate(t, api, "users", 1, map[string]string{"cleanup.policy": "compact"})
	tpProduce(t, api, "orders", 0, tpValues("a", "b", "c")...)
	tpProduce(t, api, "orders", 2, tpValues("d", "e")...)

	p := newPage(t, node)
	p.open("/topics")
	p.waitText(`#topics-list tr[data-topic="orders"]`, "1d00h")
	row := p.text(`#topics-list tr[data-topic="orders"]`)
	for _, want := range []string{"orders", "3", "5"} {
		if !strings.Contains(row, want) {
			t.Errorf("orders row %q lacks %q", row, want)
		}
	}
	p.waitText(`#topics-list tr[data-topic="users"]`, "compacted")
	// Sizes and durations in human units, the raw value on hover: the
	// retention (1d00h) and the bytes.
	var titles []string
	p.eval(`Array.from(document.querySelectorAll('#topics-list tr[data-topic="orders"] .human')).map(e => e.title)`, &titles)
	if got := strings.Join(titles, "|"); !strings.Contains(got, " bytes") || !strings.Contains(got, "86400000 ms") {
		t.Errorf("the orders row's raw values on hover are %q, want its bytes and 86400000 ms", got)
	}

	// The produce rate: records appended between two polls show as a
	// rate above zero, and the samples draw a line.
	tpProduce(t, api, "orders", 1, tpValues("f", "g", "h", "i")...)
	p.must("a produce rate above zero", chromedp.Poll(`(() => {
		const r = document.querySelector('#topics-list tr[data-topic="orders"] .rate');
		return !!r && /[1-9]/.test(r.textContent); })()`, nil, chromedp.WithPollingTimeout(pageTimeout)))
	p.must("a rate sparkline", chromedp.Poll(`document.querySelector('#topics-list tr[data-topic="orders"] polyline') !== null`, nil,
		chromedp.WithPollingTimeout(pageTimeout)))

	// The filter keeps the URL and shows only what matches.
	p.fill("#topics-filter", "use")
	p.waitText("#topics-count", "1 of 2 topics")
	if n := p.count("#topics-list tbody tr"); n != 1 {
		t.Errorf("filtered rows: %d, want 1", n)
	}
	if h := tpHash(p); !strings.Contains(h, "q=use") {
		t.Errorf("hash %q does not keep the filter", h)
	}

	p.open("/topics/orders")
	p.waitText("#partitions", "Segments")
	p.waitText("#topic-summary", "9")
	if n := p.count("#partitions td .human[title$=' bytes']"); n != 3 {
		t.Errorf("partitions whose bytes show the raw value on hover: %d, want 3", n)
	}
	if n := p.count("#partitions tbody tr"); n != 3 {
		t.Errorf("partition rows: %d, want 3", n)
	}
	if got := p.text(`#partitions tr[data-partition="0"]`); !strings.Contains(got, "3") {
		t.Errorf("partition 0 row %q lacks its end offset 3", got)
	}
	p.waitText("#settings", "retention.ms")
}

func TestTopicsPageCreateAlterGrowDelete(t *testing.T) {
	node := logdtest.Start(t, logdtest.Options{})
	api := tpAPI(node)
	p := newPage(t, node)
	p.open("/topics")
	p.waitText("#topics-list", "No topics yet.")

	// Create.
	p.click("#topic-new")
	p.fill("#create-name", "payments")
	p.fill("#create-partitions", "2")
	p.fill("#create-retention-ms", "3600000")
	p.fill("#create-config", "max.message.bytes=65536")
	p.click("#create-submit")
	p.waitText("#topic-name", "payments")
	d, err := tpDescribe(t, api, "payments")
	if err != nil {
		t.Fatalf("describe after create: %v", err)
	}
	if d.Topic.Partitions != 2 || d.Topic.Config["retention.ms"] != "3600000" || d.Topic.Config["max.message.bytes"] != "65536" {
		t.Fatalf("created %v, want 2 partitions, retention.ms 3600000, max.message.bytes 65536", d.Topic)
	}

	// A bad creation shows the API's error and creates nothing.
	p.open("/topics")
	p.click("#topic-new")
	p.fill("#create-name", "bad")
	p.fill("#create-config", "no.such.setting=1")
	p.click("#create-submit")
	p.waitText("#create-result", "invalid_argument")
	if errs := p.takeErrors(); len(errs) != 1 || !strings.Contains(errs[0], "CreateTopic") {
		t.Errorf("the browser logged %q, want the refused CreateTopic only", errs)
	}
	if _, err := tpDescribe(t, api, "bad"); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("the refused topic: %v, want not found", err)
	}

	// Alter a setting, then return it to its default.
	p.open("/topics/payments")
	p.waitText("#settings", "retention.ms")
	// Durations and sizes in human units, the raw value on hover.
	p.waitText(`#settings .setting-means[data-key="retention.ms"]`, "1h00m")
	var raw string
	p.eval(`document.querySelector('#settings .setting-means[data-key="retention.ms"] .human').title`, &raw)
	if raw != "3600000 ms" {
		t.Errorf("retention.ms's raw value on hover is %q, want 3600000 ms", raw)
	}
	p.waitText(`#settings .setting-means[data-key="max.message.bytes"]`, "64 KiB")
	// The delete button is not among the everyday links but set apart.
	if n := p.count(".toolbar #topic-delete"); n != 0 {
		t.Error("Delete topic… sits in the toolbar beside Browse records")
	}
	p.waitText("#topic-danger", "Delete topic")
	p.fill(`#settings input[data-key="retention.ms"]`, "7200000")
	p.click("#settings-save")
	p.waitText("#topic-message", "Changed retention.ms")
	tpWait(t, "retention.ms 7200000", func() bool {
		d, err := tpDescribe(t, api, "payments")
		return err == nil && d.Topic.Config["retention.ms"] == "7200000"
	})
	p.click(`#settings button.setting-default[data-key="retention.ms"]`)
	p.waitText("#topic-message", "returned to its default")
	tpWait(t, "retention.ms back to its default", func() bool {
		d, err := tpDescribe(t, api, "payments")
		return err == nil && d.Topic.Config["retention.ms"] != "7200000" && d.Topic.Config["retention.ms"] != "3600000"
	})

	// Grow: checked first, made on the second press.
	p.fill("#grow-count", "4")
	p.click("#grow-check")
	p.waitText("#grow-plan", "Keyed records")
	if d, _ := tpDescribe(t, api, "payments"); d.Topic.Partitions != 2 {
		t.Fatalf("the check grew the topic to %d partitions", d.Topic.Partitions)
	}
	p.click("#grow-execute")
	p.waitText("#topic-message", "grew from 2 to 4")
	if d, _ := tpDescribe(t, api, "payments"); d.Topic.Partitions != 4 {
		t.Fatalf("after growing: %d partitions, want 4", d.Topic.Partitions)
	}

	// Delete: cancelled first, then confirmed by typing the name.
	p.click("#topic-delete")
	p.click("#confirm-cancel")
	if _, err := tpDescribe(t, api, "payments"); err != nil {
		t.Fatalf("a cancelled delete deleted: %v", err)
	}
	p.click("#topic-delete")
	p.fill("#confirm-input", "payment")
	var disabled bool
	p.eval(`document.querySelector('#confirm-ok').disabled`, &disabled)
	if !disabled {
		t.Error("the delete button is enabled before the name is typed whole")
	}
	p.fill("#confirm-input", "payments")
	p.click("#confirm-ok")
	p.waitText("#view h1", "Topics")
	if _, err := tpDescribe(t, api, "payments"); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("after delete: %v, want not found", err)
	}
}

func TestRecordsBrowserViewsSearchAndTime(t *testing.T) {
	node := logdtest.Start(t, logdtest.Options{})
	api := tpAPI(node)
	tpCreate(t, api, "events", 2, nil)
	t0 := time.Now().Add(-2 * time.Hour).UnixMilli()
	tpProduce(t, api, "events", 0, &logdv1.Record{Key: []byte("k1"), Value: []byte(`{"a":1,"b":[true,null]}`), TimestampMs: t0,
		Headers: []*logdv1.Header{{Key: "trace", Value: []byte("abc")}}})
	tpProduce(t, api, "events", 0, &logdv1.Record{Key: []byte("k2"), Value: []byte("hello world"), TimestampMs: t0 + 3_600_000})

	p := newPage(t, node)
	p.open("/topics/events/records?p=0")
	p.waitText("#records-list", `{"a":1,"b":[true,null]}`)
	p.waitText("#records-list", "trace: abc")
	p.waitText("#records-list", "hello world")
	p.waitText("#records-range", "Offsets 0–1")

	p.click("#view-json")
	p.waitText("#records-list", "\"a\": 1,\n  \"b\": [")
	p.waitText(`#records-list tr[data-offset="1"]`, "not JSON")
	if h := tpHash(p); !strings.Contains(h, "v=json") {
		t.Errorf("hash %q does not keep the view", h)
	}
	p.click("#view-hex")
	p.waitText(`#records-list tr[data-offset="0"]`, "00000000  7b 22 61 22 3a 31")
	p.waitText(`#records-list tr[data-offset="1"]`, "68 65 6c 6c 6f 20 77 6f")
	p.click("#view-text")

	// Search within what was fetched.
	p.fill("#records-search", "HELLO")
	p.waitText("#records-range", "1 of 2 match")
	if n := p.count("#records-list tbody tr"); n != 1 {
		t.Errorf("rows matching hello: %d, want 1", n)
	}
	p.fill("#records-search", "")

	// From a time: ListOffsets by timestamp finds the second record.
	p.fill("#records-time", time.UnixMilli(t0+1_800_000).UTC().Format(time.RFC3339))
	p.click("#records-read")
	p.waitText("#records-range", "Offsets 1–1")
	if h := tpHash(p); !strings.Contains(h, "time=") {
		t.Errorf("hash %q does not keep the time", h)
	}
	// Previous goes back a page from there; a shared offset URL opens it.
	p.click("#records-prev")
	p.waitText("#records-range", "Offsets 0–1")
	p.open("/topics/events/records?p=0&offset=1")
	p.waitText("#records-range", "Offsets 1–1")
	p.open("/topics/events/records?p=1")
	p.waitText("#records-range", "No records from offset 0")
}

// TestRecordsBrowserShowsMarkupAsText: values, keys and headers that are
// markup are shown as their characters in every view: no element comes
// from them, no handler or script runs, no dialog opens and the page
// logs no error (a Content-Security-Policy violation would be one).
func TestRecordsBrowserShowsMarkupAsText(t *testing.T) {
	node := logdtest.Start(t, logdtest.Options{})
	api := tpAPI(node)
	tpCreate(t, api, "evil", 1, nil)
	hostile := []string{
		`<img src=x onerror=alert(1)>`,
		`<script>window.pwned=1;alert(2)</script>`,
		`"><svg onload=alert(3)>`,
		`<a href="javascript:alert(4)">click me</a>`,
		`<iframe src="javascript:alert(5)"></iframe>`,
	}
	var recs []*logdv1.Record
	for i, v := range hostile {
		recs = append(recs, &logdv1.Record{Key: []byte(v), Value: []byte(v),
			Headers: []*logdv1.Header{{Key: fmt.Sprintf("<b>h%d</b>", i), Value: []byte(v)}}})
	}
	tpProduce(t, api, "evil", 0, recs...)

	p := newPage(t, node)
	var dialogs atomic.Int32
	chromedp.ListenTarget(p.ctx, func(ev any) {
		if _, ok := ev.(*cdppage.EventJavascriptDialogOpening); ok {
			dialogs.Add(1)
			go chromedp.Run(p.ctx, cdppage.HandleJavaScriptDialog(false)) //nolint:errcheck // best effort: the test fails anyway
		}
	})
	p.must("enable page events", cdppage.Enable())
	p.open("/topics/evil/records")
	for _, view := range []string{"text", "json", "hex"} {
		p.click("#view-" + view)
		p.waitText("#records-range", "Offsets 0–4")
		if view != "hex" {
			for _, v := range hostile {
				p.waitText("#records-list", v)
			}
		}
		p.waitText("#records-list", "<b>h0</b>")
		var injected int
		p.eval(`document.querySelectorAll('#records-list img, #records-list svg, #records-list script, #records-list iframe, #records-list a, #records-list b').length +
			document.querySelectorAll('img, iframe, script:not([src])').length`, &injected)
		if injected != 0 {
			t.Errorf("%s view: %d elements came from record data", view, injected)
		}
		var pwned bool
		p.eval(`window.pwned === 1`, &pwned)
		if pwned {
			t.Errorf("%s view: a script from a record ran", view)
		}
	}
	time.Sleep(200 * time.Millisecond) // an onerror or onload would have fired by now
	if n := dialogs.Load(); n != 0 {
		t.Errorf("%d dialogs opened", n)
	}
}

func TestRecordsBrowserProducesARecord(t *testing.T) {
	node := logdtest.Start(t, logdtest.Options{})
	api := tpAPI(node)
	tpCreate(t, api, "tests", 2, nil)
	p := newPage(t, node)
	p.open("/topics/tests/records?p=1")
	p.waitText("#records-range", "No records")
	p.must("pick partition 1", chromedp.SetValue("#produce-partition", "1", chromedp.ByQuery))
	p.fill("#produce-key", "pk")
	p.fill("#produce-value", "from the console")
	p.fill("#produce-headers", "src=console\nn=1")
	p.click("#produce-submit")
	p.waitText("#produce-result", "Appended at partition 1, offset 0.")
	p.waitText("#records-list", "from the console")

	resp, err := api.Fetch(t.Context(), connect.NewRequest(&logdv1.FetchRequest{Topic: "tests", Partition: 1}))
	if err != nil {
		t.Fatal(err)
	}
	recs := resp.Msg.Records
	if len(recs) != 1 || string(recs[0].Key) != "pk" || string(recs[0].Value) != "from the console" ||
		len(recs[0].Headers) != 2 || recs[0].Headers[0].Key != "src" || string(recs[0].Headers[0].Value) != "console" {
		t.Fatalf("partition 1 holds %v, want the produced record", recs)
	}

	// A bad header line is refused in the page and sends nothing.
	p.fill("#produce-headers", "novalue")
	p.click("#produce-submit")
	p.waitText("#produce-result", "is not key=value")
	if n := node.Calls("Produce"); n != 1 {
		t.Errorf("Produce called %d times, want 1", n)
	}
}

// TestScaleTopicsGroupsQueues renders the topics, groups and queues pages
// of a node with 1,000 topics and 100 groups (50 consumer groups with
// committed offsets, 50 queue groups) and logs how long each took; it
// asserts no timing. LOGD_FAULT_LONG=1 (make fault) runs it.
func TestScaleTopicsGroupsQueues(t *testing.T) {
	if os.Getenv("LOGD_FAULT_LONG") != "1" {
		t.Skip("LOGD_FAULT_LONG=1 runs the scale variant")
	}
	const topics, groups = 1000, 100
	node := logdtest.Start(t, logdtest.Options{})
	api := tpAPI(node)
	start := time.Now()
	tpParallel(t, topics, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("topic-%04d", i)
		if _, err := api.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: name, Partitions: 2})); err != nil {
			return err
		}
		p := int32(i % 2)
		_, err := api.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: name, Records: []*logdv1.Record{{Value: []byte("v"), Partition: &p}}}))
		return err
	})
	tpParallel(t, groups, func(ctx context.Context, i int) error {
		topic := fmt.Sprintf("topic-%04d", i)
		if i%2 == 0 {
			_, err := api.ResetGroupOffsets(ctx, connect.NewRequest(&logdv1.ResetGroupOffsetsRequest{Group: fmt.Sprintf("group-%03d", i),
				Topics: []*logdv1.ResetTopic{{Topic: topic}}, Strategy: "to-latest", Execute: true}))
			return err
		}
		_, err := api.CreateQueueGroup(ctx, connect.NewRequest(&logdv1.CreateQueueGroupRequest{Topic: topic, Group: fmt.Sprintf("queue-%03d", i)}))
		return err
	})
	t.Logf("made %d topics and %d groups in %v", topics, groups, time.Since(start).Round(time.Millisecond))
	// Queue groups add their dead-letter topics to the list.
	all, err := api.ListTopics(t.Context(), connect.NewRequest(&logdv1.ListTopicsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	n := len(all.Msg.Topics)
	listed := fmt.Sprintf("%d,%03d topics", n/1000, n%1000)

	p := newPage(t, node)
	for _, c := range []struct{ route, sel, want string }{
		{"/topics", "#topics-count", listed},
		{"/groups", "#view", "group-000"},
		{"/queues", "#view", "queue-001"},
	} {
		if c.route != "/topics" && !tpHasPage(t, strings.TrimPrefix(c.route, "/")) {
			t.Logf("%s: no such page in pages.js yet, skipped", c.route)
			continue
		}
		begin := time.Now()
		p.open(c.route)
		p.waitText(c.sel, c.want)
		t.Logf("%s rendered in %v (under shared load)", c.route, time.Since(begin).Round(time.Millisecond))
	}
	begin := time.Now()
	p.open("/topics/topic-0999")
	p.waitText("#partitions", "Segments")
	t.Logf("/topics/topic-0999 rendered in %v (under shared load)", time.Since(begin).Round(time.Millisecond))
}

// tpParallel runs fn for 0..n-1 on 8 goroutines and fails the test on
// the first error.
func tpParallel(t *testing.T, n int, fn func(ctx context.Context, i int) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("item %d: %w", i, err); cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
}

// tpHasPage reports whether the console registers a page at path.
func tpHasPage(t *testing.T, path string) bool {
	t.Helper()
	body, err := os.ReadFile("assets/pages.js")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(body), "'./pages/"+path+".js'")
}

// tpRaftBackend is a node as the cluster page sees it through Status: its
// Raft view, the leader's view of its followers and its disk. Other
// calls are not implemented (the embedded nil Backend panics).
type tpRaftBackend struct {
	backend.API
	id, leader string
	metrics    backend.RaftMetrics
	disk       backend.DiskUsage
}

func (b *tpRaftBackend) NodeID() string                   { return b.id }
func (b *tpRaftBackend) APIAddress() string               { return b.id + ".example:7070" }
func (b *tpRaftBackend) Ready() bool                      { return true }
func (b *tpRaftBackend) Failed() error                    { return nil }
func (b *tpRaftBackend) IsLeader() bool                   { return b.id == b.leader }
func (b *tpRaftBackend) MemberAPIAddresses() []string     { return nil }
func (b *tpRaftBackend) RaftMetrics() backend.RaftMetrics { return b.metrics }
func (b *tpRaftBackend) LeaderAPIAddress() (string, string) {
	return b.leader + ".example:7070", b.leader
}
func (b *tpRaftBackend) NodeAPIAddress(id string) (string, bool) { return id + ".example:7070", true }
func (b *tpRaftBackend) DiskUsage() (backend.DiskUsage, error)   { return b.disk, nil }

func (b *tpRaftBackend) Status() backend.Status {
	st := backend.Status{NodeID: b.id, State: "Follower", LeaderID: b.leader, Term: 4, LastLogIndex: b.metrics.LastIndex}
	if b.IsLeader() {
		st.State = "Leader"
	}
	for _, id := range []string{"n1", "n2", "n3"} {
		st.Members = append(st.Members, backend.Member{ID: id, Address: id + ".example:7071", Suffrage: "Voter"})
	}
	return st
}

// TestClusterPageFollowerLagAndHealth: on a leader the page shows each
// follower's lag and last contact and fails the contact check for one
// that never answered, and the disk check when it is nearly full; on a
// follower it says the leader holds the lags and links to its console.
func TestClusterPageFollowerLagAndHealth(t *testing.T) {
	serve := func(b *tpRaftBackend) string {
		srv := httptest.NewServer(server.New(server.Options{Backend: b}).Handler())
		t.Cleanup(srv.Close)
		return srv.URL
	}
	leader := serve(&tpRaftBackend{id: "n1", leader: "n1", disk: backend.DiskUsage{Total: 100 << 30, Avail: 3 << 30},
		metrics: backend.RaftMetrics{LeaderChanges: 2, LastIndex: 50, Followers: []backend.FollowerStats{
			{ID: "n2", LastIndex: 45, LastContact: time.Now().Add(-time.Second)},
			{ID: "n3"},
		}}})
	p := newPageAt(t, leader)
	p.open("/cluster")
	p.waitText("#cluster-health", "1 of 2 followers out of contact: n3")
	p.waitText(`#cluster-members tr[data-node="n2"]`, "ago")
	if row := p.text(`#cluster-members tr[data-node="n2"]`); !strings.Contains(row, "5") {
		t.Errorf("n2 row %q lacks its lag of 5 entries", row)
	}
	p.waitText(`#cluster-members tr[data-node="n3"]`, "never")
	p.waitText("#cluster-summary", "2 leader changes seen")
	if n := p.count(`#cluster-health li[data-level="bad"]`); n != 2 {
		t.Errorf("%d failed checks, want 2 (contact, disk): %q", n, p.text("#cluster-health"))
	}

	follower := serve(&tpRaftBackend{id: "n2", leader: "n1", disk: backend.DiskUsage{Total: 100 << 30, Avail: 60 << 30}})
	f := newPageAt(t, follower)
	f.open("/cluster")
	f.waitText("#cluster-note", "the leader n1 holds the follower lags")
	f.waitText("#cluster-health", "Follower contact: see the leader")
	var href string
	f.eval(`document.querySelector('#leader-console').getAttribute('href')`, &href)
	if href != "http://n1.example:7070/ui/#/cluster" {
		t.Errorf("leader console link %q", href)
	}
}
