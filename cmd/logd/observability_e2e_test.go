package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/internal/e2e"
)

// The operator's side of observability: deploy/prometheus/alerts.yml
// checked and unit-tested by promtool, and deploy/grafana/logd.json's
// queries run by a real Prometheus against a real cluster. Both tools come
// from Debian's prometheus package (scripts/test-tools.sh installs it).

const (
	alertRules     = "../../deploy/prometheus/alerts.yml"
	alertRuleTests = "../../deploy/prometheus/alerts_test.yml"
	dashboard      = "../../deploy/grafana/logd.json"
)

// prometheusTool returns the path of name (promtool or prometheus).
// Without it the test skips, except under CI=true, where a missing tool
// is a broken setup and fails.
func prometheusTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed: scripts/test-tools.sh installs Debian's prometheus package (make test runs it)", name)
		}
		t.Skipf("%s is not installed: run scripts/test-tools.sh (make test does) to run this test", name)
	}
	return p
}

// TestAlertRules: the alert rules load (promtool check rules) and each
// alert fires, or stays quiet, as its unit tests say (promtool test
// rules).
func TestAlertRules(t *testing.T) {
	promtool := prometheusTool(t, "promtool")
	for _, args := range [][]string{{"check", "rules", alertRules}, {"test", "rules", alertRuleTests}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// dashboardQueries returns each panel's title and query.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboard, err)
	}
	out := map[string]string{}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) != 1 || p.Targets[0].Expr == "" {
			t.Fatalf("panel %q: want one query, got %d", p.Title, len(p.Targets))
		}
		out[p.Title] = p.Targets[0].Expr
	}
	return out
}

// promQuery runs an instant query and returns how many series answer
// with a number (NaN, as a rate of nothing gives, is no data).
func promQuery(ctx context.Context, base, expr string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query?query="+url.QueryEscape(expr), nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, fmt.Errorf("decode answer to %s: %w", expr, err)
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("query %s: %s", expr, r.Error)
	}
	n := 0
	for _, v := range r.Data.Result {
		if s, ok := v.Value[1].(string); ok && s != "NaN" {
			n++
		}
	}
	return n, nil
}

// startPrometheus runs Prometheus on 127.0.0.1, scraping targets every
// 500 ms as job logd with the alert rules loaded, until the test ends. It
// returns its base URL once it is ready.
func startPrometheus(t *testing.T, ctx context.Context, targets []string) string {
	t.Helper()
	bin := prometheusTool(t, "prometheus")
	dir := t.TempDir()
	rules, err := filepath.Abs(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(targets))
	for i, a := range targets {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 500ms
  scrape_timeout: 400ms
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: logd
    static_configs:
      - targets: [%s]
`, rules, strings.Join(quoted, ", "))
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	listen := e2e.FreeAddr(t)
	var out bytes.Buffer
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus output:\n%s", e2e.Tail(out.String(), 4000))
		}
	})
	base := "http://" + listen
	e2e.WaitFor(t, ctx, "prometheus ready", func() bool {
		resp, err := http.Get(base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return base
}

// TestDashboardQueriesReturnData: a real Prometheus scrapes a real
// three-node cluster under a small workload (records produced and
// fetched, snapshots, a consumer group behind, a queue group with a
// dead letter), and every panel of the Grafana dashboard answers with a
// number. Renaming a panel's metric to one logd does not export fails it.
func TestDashboardQueriesReturnData(t *testing.T) {
	e2e.ParallelShort(t)
	queries := dashboardQueries(t)
	prometheusTool(t, "prometheus")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := e2e.NewCluster(t, 3, "--snapshot-threshold", "16", "--snapshot-interval", "500ms")
	var targets []string
	for _, nd := range c.Nodes {
		targets = append(targets, nd.Listen)
	}
	prom := startPrometheus(t, ctx, targets)
	e2e.WaitFor(t, ctx, "prometheus scraped every node", func() bool {
		n, err := promQuery(ctx, prom, `up{job="logd"} == 1`)
		return err == nil && n == len(targets)
	})

	leader := c.Leader(ctx)
	cl, err := client.New(leader.Listen, client.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.CreateTopic(ctx, "orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := cl.Produce(ctx, "orders", []client.Record{{Key: []byte(fmt.Sprint(i)), Value: []byte("order")}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.Fetch(ctx, client.FetchRequest{Topic: "orders", Partition: 0}); err != nil {
		t.Fatal(err)
	}
	// A group that committed nothing past the start lags every record.
	if _, err := cl.ResetGroupOffsets(ctx, client.ResetOffsetsRequest{Group: "billing", Topics: map[string][]int32{"orders": nil},
		Strategy: client.ResetToEarliest, Execute: true}); err != nil {
		t.Fatal(err)
	}
	// A queue group that dead-letters one record.
	if _, err := cl.CreateQueueGroup(ctx, "orders", "workers", client.QueueGroupConfig{MaxDeliveries: 3}, false); err != nil {
		t.Fatal(err)
	}
	claimed, err := cl.Claim(ctx, client.ClaimRequest{Topic: "orders", Group: "workers", MaxRecords: 1, Lease: time.Minute, MaxWait: time.Second})
	if err != nil || len(claimed.Jobs) != 1 {
		t.Fatalf("claim: %v, %d jobs", err, len(claimed.Jobs))
	}
	if _, err := cl.Nack(ctx, "orders", "workers", client.Nack{Token: claimed.Jobs[0].Token, Permanent: true, Error: "test"}); err != nil {
		t.Fatal(err)
	}
	// Records keep coming while the panels are queried, so the windows of
	// rate() see them move, and snapshots keep being taken.
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			cl.Produce(ctx, "orders", []client.Record{{Key: []byte(fmt.Sprint(i)), Value: []byte("order")}})
			cl.Fetch(ctx, client.FetchRequest{Topic: "orders", Partition: int32(i % 2)})
		}
	}()
	defer func() { close(stop); <-done }()

	missing := map[string]string{}
	for title, expr := range queries {
		missing[title] = expr
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(missing) > 0 && time.Now().Before(deadline) {
		for title, expr := range missing {
			n, err := promQuery(ctx, prom, expr)
			if err != nil {
				t.Fatalf("panel %q: %v", title, err)
			}
			if n > 0 {
				delete(missing, title)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
	for title, expr := range missing {
		t.Errorf("panel %q has no data: %s", title, expr)
	}
	t.Logf("%d panels answered", len(queries)-len(missing))
}
