package kafka

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMetrics: requests, errors and latency per API key, connections, and
// connections closed by a request.
func TestMetrics(t *testing.T) {
	tn := startNode(t)
	tn.createTopic("m", 1, nil)
	c := dial(t, tn.addr)
	c.do(produceReq(9, -1, "m", 0, records(t, "a")))
	c.do(produceReq(9, -1, "nope", 0, records(t, "a")))
	c.do(fetchReq(12, "m", 0, 0, 0, 1, 1<<20))
	bad := dial(t, tn.addr)
	bad.send(kmsg.NewPtrAddPartitionsToTxnRequest())
	bad.expectClosed()

	m := tn.srv.metrics
	checks := []struct {
		what string
		got  float64
		want float64
	}{
		{"produce requests", value(t, m.requests.WithLabelValues("Produce")), 2},
		{"fetch requests", value(t, m.requests.WithLabelValues("Fetch")), 1},
		{"produce errors", value(t, m.errors.WithLabelValues("Produce", "UNKNOWN_TOPIC_OR_PARTITION")), 1},
		{"records produced", value(t, m.records.WithLabelValues("produce")), 1},
		{"unsupported closes", value(t, m.refused.WithLabelValues("unsupported")), 1},
		{"connections", value(t, m.connsTotal), 2},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %v; want %v", c.what, c.got, c.want)
		}
	}
	// A latency is observed once its response is written, just after the
	// client has it.
	for i := 0; ; i++ {
		ch := make(chan prometheus.Metric, 16)
		m.latency.Collect(ch)
		if n := len(ch); n == 2 {
			break
		} else if i == 200 {
			t.Errorf("latency series: %d; want Produce and Fetch", n)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Registered on the registry given.
	fams, err := tn.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range fams {
		found = found || f.GetName() == "logd_kafka_requests_total" && len(f.GetMetric()) == 2
	}
	if !found {
		t.Error("logd_kafka_requests_total is not on the registry with its two series")
	}
}

// value reads a counter or gauge.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}
