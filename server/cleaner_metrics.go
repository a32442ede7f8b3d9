package server

import (
	"github.com/logd-dev/logd/backend"
	"github.com/prometheus/client_golang/prometheus"
)

// cleanerCollector reports retention and compaction at scrape time from
// the FSM's counters (commands applied on this node, so every replica
// counts the same work) and the node's cleaner stats (the leader's planning
// and preparing passes).
type cleanerCollector struct{ b backend.API }

var (
	descCleanerBytesDeleted = prometheus.NewDesc("logd_cleaner_bytes_deleted_total",
		"Partition bytes removed by retention trims and compactions applied on this node.", nil, nil)
	descCleanerRecordsCompacted = prometheus.NewDesc("logd_cleaner_records_compacted_total",
		"Records removed by compactions applied on this node.", nil, nil)
	descCleanerTrims = prometheus.NewDesc("logd_cleaner_trims_total",
		"Retention trims applied on this node that deleted segments.", nil, nil)
	descCleanerCompactions = prometheus.NewDesc("logd_cleaner_compactions_total",
		"Compactions applied on this node.", nil, nil)
	descCleanerPasses = prometheus.NewDesc("logd_cleaner_passes_total",
		"Cleaner passes run by this node (as leader).", nil, nil)
	descCleanerPassSeconds = prometheus.NewDesc("logd_cleaner_pass_duration_seconds_total",
		"Time spent in cleaner passes; divide by logd_cleaner_passes_total for the mean.", nil, nil)
	descCleanerLastPass = prometheus.NewDesc("logd_cleaner_last_pass_duration_seconds",
		"Duration of this node's last cleaner pass.", nil, nil)
	descCleanerPrepared = prometheus.NewDesc("logd_cleaner_prepared_compactions_total",
		"Compactions this node's cleaner prepared beside appends.", nil, nil)
	descCleanerPreparedBytes = prometheus.NewDesc("logd_cleaner_prepared_input_bytes_total",
		"Input bytes of the compactions this node's cleaner prepared.", nil, nil)
	descCleanerPrepareSeconds = prometheus.NewDesc("logd_cleaner_prepare_duration_seconds_total",
		"Time this node's cleaner spent preparing compactions.", nil, nil)
)

func (c *cleanerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCleanerBytesDeleted, descCleanerRecordsCompacted, descCleanerTrims, descCleanerCompactions,
		descCleanerPasses, descCleanerPassSeconds, descCleanerLastPass, descCleanerPrepared, descCleanerPreparedBytes, descCleanerPrepareSeconds} {
		ch <- d
	}
}

func (c *cleanerCollector) Collect(ch chan<- prometheus.Metric) {
	fc := c.b.CleanerCounters()
	st := c.b.CleanerStats()
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	counter(descCleanerBytesDeleted, float64(fc.BytesDeleted))
	counter(descCleanerRecordsCompacted, float64(fc.RecordsCompacted))
	counter(descCleanerTrims, float64(fc.Trims))
	counter(descCleanerCompactions, float64(fc.Compactions))
	counter(descCleanerPasses, float64(st.Runs))
	counter(descCleanerPassSeconds, st.PassDuration.Seconds())
	counter(descCleanerPrepared, float64(st.Prepared))
	counter(descCleanerPreparedBytes, float64(st.PreparedBytes))
	counter(descCleanerPrepareSeconds, st.PrepareDuration.Seconds())
	ch <- prometheus.MustNewConstMetric(descCleanerLastPass, prometheus.GaugeValue, st.LastPassDuration.Seconds())
}
