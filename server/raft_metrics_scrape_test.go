package server_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/replication/catchup"
)

// scrape reads /metrics from url and returns its families by name.
func scrape(t *testing.T, hs *httptest.Server) map[string]*metricFamily {
	t.Helper()
	resp, err := hs.Client().Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]*metricFamily, len(mfs))
	for name, mf := range mfs {
		out[name] = &metricFamily{mf}
	}
	return out
}

// TestRaftAndTopicMetricsScraped: after a workload (produce, fetch, a
// snapshot), /metrics has each of Raft's families with a plausible value,
// the data directory's file system, snapshot catch-up's (none on a single
// node) with its budget, and per-topic records and bytes in
// and out; deleting the topic removes its series.
func TestRaftAndTopicMetricsScraped(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	n, srv, _ := testServer(t, ctx)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	c := logdv1connect.NewLogServiceClient(hs.Client(), hs.URL)
	for !n.Ready() {
		select {
		case <-ctx.Done():
			t.Fatal("not ready")
		case <-time.After(5 * time.Millisecond):
		}
	}
	if _, err := c.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: "orders", Partitions: 1})); err != nil {
		t.Fatal(err)
	}
	var recs []*logdv1.Record
	for range 10 {
		recs = append(recs, &logdv1.Record{Value: []byte("0123456789")})
	}
	if _, err := c.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "orders", Records: recs})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Fetch(ctx, connect.NewRequest(&logdv1.FetchRequest{Topic: "orders", Partition: 0, Offset: 0})); err != nil {
		t.Fatal(err)
	}
	if err := n.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}

	mfs := scrape(t, hs)
	histCount := func(name string) {
		t.Helper()
		if got := mfs[name].one(t).GetHistogram().GetSampleCount(); got == 0 {
			t.Errorf("%s: no observations", name)
		}
	}
	histCount("logd_raft_fsm_apply_duration_seconds")
	histCount("logd_raft_log_store_duration_seconds")
	histCount("logd_raft_snapshot_persist_duration_seconds")
	for _, tc := range []struct {
		name   string
		labels map[string]string
		min    float64
		max    float64
	}{
		{name: "logd_raft_snapshot_bytes", min: 1, max: 1 << 20},
		{name: "logd_raft_leader_changes_total", min: 1, max: 1},
		{name: "logd_raft_leader_known", min: 1, max: 1},
		{name: "logd_data_dir_fs_size_bytes", min: 1 << 20, max: 1 << 62},
		{name: "logd_data_dir_fs_avail_bytes", min: 1, max: 1 << 62},
		{name: "logd_topic_records_total", labels: map[string]string{"topic": "orders", "direction": "in"}, min: 10, max: 10},
		{name: "logd_topic_records_total", labels: map[string]string{"topic": "orders", "direction": "out"}, min: 10, max: 10},
		{name: "logd_topic_bytes_total", labels: map[string]string{"topic": "orders", "direction": "in"}, min: 100, max: 100},
		{name: "logd_topic_bytes_total", labels: map[string]string{"topic": "orders", "direction": "out"}, min: 100, max: 100},
		// A single node copies no segments from peers; its budget is the
		// default.
		{name: "logd_catchup_bytes_total", min: 0, max: 0},
		{name: "logd_catchup_throttle_wait_seconds_total", min: 0, max: 0},
		{name: "logd_catchup_limit_bytes_per_second", min: catchup.DefaultMoveBytesPerSecond, max: catchup.DefaultMoveBytesPerSecond},
	} {
		v, ok := mfs[tc.name].value(tc.labels)
		if !ok || v < tc.min || v > tc.max {
			t.Errorf("%s%v = %v (found %v), want in [%v, %v]", tc.name, tc.labels, v, ok, tc.min, tc.max)
		}
	}
	if mf := mfs["logd_raft_follower_index_lag"]; mf != nil {
		t.Errorf("a single node reports followers: %v", mf)
	}

	if _, err := c.DeleteTopic(ctx, connect.NewRequest(&logdv1.DeleteTopicRequest{Name: "orders"})); err != nil {
		t.Fatal(err)
	}
	if mf := scrape(t, hs)["logd_topic_records_total"]; mf != nil {
		t.Errorf("deleted topic still counted: %v", mf)
	}
}

// metricFamily is a scraped family with lookups by label.
type metricFamily struct{ *dto.MetricFamily }

// one returns the family's only metric.
func (f *metricFamily) one(t *testing.T) *dto.Metric {
	t.Helper()
	if f == nil || len(f.GetMetric()) != 1 {
		t.Fatalf("want one metric, got %v", f)
	}
	return f.GetMetric()[0]
}

// value returns the gauge or counter value of the metric with labels.
func (f *metricFamily) value(labels map[string]string) (float64, bool) {
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		for k, v := range labels {
			found := false
			for _, l := range m.GetLabel() {
				found = found || (l.GetName() == k && l.GetValue() == v)
			}
			if !found {
				continue next
			}
		}
		if m.GetCounter() != nil {
			return m.GetCounter().GetValue(), true
		}
		return m.GetGauge().GetValue(), true
	}
	return 0, false
}
