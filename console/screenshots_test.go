package console_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
)

// TestConsoleScreenshots saves a PNG of each page of the navigation bar,
// of the consumer group's and the queue group's pages, of a consume as a
// group member, of a dead-letter
// topic with one record inspected and of a redrive job, at 1280x800 in light mode, plus that topic in dark mode, into
// the directory LOGD_CONSOLE_SCREENSHOTS names (make console-screenshots:
// docs/console/). The node holds demo-like data: topics, a consumer group
// with lag, a queue group with records in flight and dead letters.
func TestConsoleScreenshots(t *testing.T) {
	dir := os.Getenv("LOGD_CONSOLE_SCREENSHOTS")
	if dir == "" {
		t.Skip("set LOGD_CONSOLE_SCREENSHOTS=DIR to save screenshots (make console-screenshots)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Samples every second, so the charts have a shape after a little
	// traffic (the node's default is every 10 s).
	node := logdtest.Start(t, logdtest.Options{HistoryInterval: time.Second})
	c := dlqClient(t, node, "")
	job := shotFill(t, ctx, c)
	stopTraffic := shotTraffic(t, ctx, c, node)
	defer stopTraffic()

	p := newPage(t, node)
	p.must("viewport", emulation.SetDeviceMetricsOverride(1280, 800, 1, false))
	var navs []string
	p.open("/cluster")
	p.eval(`Array.from(document.querySelectorAll('#nav a')).map(a => a.getAttribute('href').replace(/^#\//, ''))`, &navs)
	type shot struct{ name, route, wait string }
	var shots []shot
	for _, n := range navs {
		shots = append(shots, shot{name: n, route: "/" + n})
	}
	shots = append(shots,
		shot{name: "topic", route: "/topics/payments", wait: "#history polyline"},
		shot{name: "group", route: "/groups/billing", wait: "#history polyline"},
		shot{name: "queue", route: "/queues/orders/workers", wait: "#history polyline"},
		shot{name: "dlq-topic", route: "/dlq/" + dlqTopic + "?sel=0%2F1", wait: "#dlq-history"},
		shot{name: "dlq-job", route: "/dlq/jobs/" + job, wait: "#job-progress"})
	for _, s := range shots {
		p.open(s.route)
		if s.wait != "" {
			p.must("wait for "+s.wait, chromedp.WaitVisible(s.wait, chromedp.ByQuery))
		}
		shotSave(t, p, filepath.Join(dir, s.name+".png"))
	}
	// Reading as a member of a new group, without committing.
	p.open("/groups/analytics/consume?topics=payments&max=8&commit=0")
	p.must("wait for the member name", pollJS(`document.querySelector('#consume-member').textContent.startsWith('console/')`))
	p.click("#consume-submit")
	p.must("wait for the consume", chromedp.WaitVisible("#consume-outcome", chromedp.ByQuery))
	shotSave(t, p, filepath.Join(dir, "group-consume.png"))

	p.open("/dlq/" + dlqTopic + "?sel=0%2F1")
	p.must("wait for the inspector", chromedp.WaitVisible("#dlq-history", chromedp.ByQuery))
	p.click("#theme")
	var dark bool
	p.eval(`document.documentElement.dataset.theme === 'dark'`, &dark)
	if !dark {
		p.click("#theme") // the system was dark: the first click chose light
	}
	shotSave(t, p, filepath.Join(dir, "dlq-topic-dark.png"))
	p.eval(`(() => { localStorage.removeItem('logd.console.theme'); return true; })()`, new(bool))
}

// shotSave waits for the page to settle (its pollers answered once) and
// saves the viewport as a PNG.
func shotSave(t *testing.T, p *page, path string) {
	t.Helper()
	p.must("settle", pollJS(`!document.querySelector('#view').textContent.includes('Reading…') && !document.querySelector('#view').textContent.startsWith('Loading')`),
		chromedp.Sleep(700*time.Millisecond)) // polls run every second or two; let the first ones paint
	var png []byte
	p.must("screenshot "+path, chromedp.CaptureScreenshot(&png))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d KiB", path, len(png)/1024)
}

// shotTraffic produces to payments and commits billing's offsets forward
// in the background, with a varying rate, until the history has 20
// samples of it; the returned function stops it.
func shotTraffic(t *testing.T, ctx context.Context, c *client.Client, node *logdtest.Server) (stop func()) {
	t.Helper()
	tctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; tctx.Err() == nil; i++ {
			n := 4 + (i*7)%13
			var recs []client.Record
			for k := range n {
				recs = append(recs, client.Record{Key: []byte(fmt.Sprintf("acct-%d", k)), Value: []byte(`{"amount":1}`)})
			}
			if _, err := c.Produce(tctx, "payments", recs); err != nil {
				return
			}
			select {
			case <-tctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	stop = func() { cancel(); <-done }
	rpc := logdv1connect.NewLogServiceClient(http.DefaultClient, node.URL())
	for {
		r, err := rpc.GetHistory(ctx, connect.NewRequest(&logdv1.GetHistoryRequest{Topic: "payments"}))
		if err != nil {
			stop()
			t.Fatal(err)
		}
		if len(r.Msg.Series) > 0 && len(r.Msg.Series[0].Values) >= 20 {
			return stop
		}
		select {
		case <-ctx.Done():
			stop()
			t.Fatal("the history did not fill")
		case <-time.After(time.Second):
		}
	}
}

// shotFill writes the demo data and returns a finished redrive job's id.
func shotFill(t *testing.T, ctx context.Context, c *client.Client) string {
	t.Helper()
	topics := []struct {
		name       string
		partitions int32
		records    int
	}{{"payments", 3, 240}, {"audit-log", 1, 80}, {"invoices", 2, 120}}
	for _, tp := range topics {
		if _, err := c.CreateTopic(ctx, tp.name, tp.partitions, nil); err != nil {
			t.Fatal(err)
		}
		var recs []client.Record
		for i := range tp.records {
			recs = append(recs, client.Record{Key: []byte(fmt.Sprintf("acct-%d", i%17)),
				Value: []byte(fmt.Sprintf(`{"id":%d,"amount":%d,"currency":"EUR"}`, i, (i*37)%500-120))})
		}
		if _, err := c.Produce(ctx, tp.name, recs); err != nil {
			t.Fatal(err)
		}
	}
	// A consumer group behind by a third of payments.
	if _, err := c.ResetGroupOffsets(ctx, client.ResetOffsetsRequest{Group: "billing", Topics: map[string][]int32{"payments": nil},
		Strategy: client.ResetToOffset, Offset: 50, Execute: true}); err != nil {
		t.Logf("consumer group billing: %v (the groups page shows none)", err)
	}
	// The queue group: dead letters of both kinds, then records in flight.
	values := []string{`{"order":"o-1001","total":129.5}`, `{"order":"o-1002","total":-4}`, `ledger row 7 locked`,
		`{"order":"o-1004","total":18}`, `{"order":"o-1005","total":72.25}`}
	dlqFill(t, ctx, c, values...)
	job, err := c.StartRedrive(ctx, client.RedriveOptions{DeadLetterTopic: dlqTopic, Records: []client.DeadLetterRef{{Partition: 0, Offset: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitRedrive(ctx, job.ID, 0, nil); err != nil {
		t.Fatal(err)
	}
	var recs []client.Record
	for i := range 12 {
		recs = append(recs, client.Record{Key: []byte(fmt.Sprintf("o-%d", 2000+i)), Value: []byte(fmt.Sprintf(`{"order":"o-%d"}`, 2000+i))})
	}
	if _, err := c.Produce(ctx, "orders", recs); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Claim(ctx, client.ClaimRequest{Topic: "orders", Group: "workers", MaxRecords: 4, Lease: time.Hour, Worker: "billing-2/815"}); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(job.ID) == "" {
		t.Fatal("no job id")
	}
	return job.ID
}
