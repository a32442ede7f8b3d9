package server

import (
	"errors"

	"github.com/logd-dev/logd/backend"
	"github.com/prometheus/client_golang/prometheus"
)

// quotaMetrics shows the cluster's topic quota beside what it bounds, and
// counts the creations it refused.
type quotaMetrics struct {
	b        backend.API
	refusals *prometheus.CounterVec // by resource
}

var (
	descTopics     = prometheus.NewDesc("logd_topics", "Topics in the cluster, as this node applied them.", nil, nil)
	descPartitions = prometheus.NewDesc("logd_partitions", "Partitions of all topics, as this node applied them.", nil, nil)
	descQuota      = prometheus.NewDesc("logd_quota_limit", "The cluster quota this node proposes topic creations under (0: none).", []string{"resource"}, nil)
)

func newQuotaMetrics(reg *prometheus.Registry, b backend.API) *quotaMetrics {
	m := &quotaMetrics{b: b, refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "logd_quota_refusals_total", Help: "Topic creations refused by the cluster quota, by resource (topics, partitions).",
	}, []string{"resource"})}
	for _, r := range []string{"topics", "partitions"} {
		m.refusals.WithLabelValues(r)
	}
	reg.MustRegister(m, m.refusals)
	return m
}

// refusal counts err if a quota refused a creation.
func (m *quotaMetrics) refusal(err error) {
	var qe *backend.QuotaError
	if errors.As(err, &qe) {
		m.refusals.WithLabelValues(qe.Resource).Inc()
	}
}

// Describe implements prometheus.Collector.
func (m *quotaMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- descTopics
	ch <- descPartitions
	ch <- descQuota
}

// Collect implements prometheus.Collector, reading the counts at scrape
// time.
func (m *quotaMetrics) Collect(ch chan<- prometheus.Metric) {
	q, topics, parts := m.b.TopicQuota()
	ch <- prometheus.MustNewConstMetric(descTopics, prometheus.GaugeValue, float64(topics))
	ch <- prometheus.MustNewConstMetric(descPartitions, prometheus.GaugeValue, float64(parts))
	ch <- prometheus.MustNewConstMetric(descQuota, prometheus.GaugeValue, float64(max(q.MaxTopics, 0)), "topics")
	ch <- prometheus.MustNewConstMetric(descQuota, prometheus.GaugeValue, float64(max(q.MaxPartitions, 0)), "partitions")
}
