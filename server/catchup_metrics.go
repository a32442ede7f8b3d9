package server

import (
	"github.com/logd-dev/logd/backend"
	"github.com/prometheus/client_golang/prometheus"
)

// catchUpCollector reports at scrape time the segment bytes this node
// copied from peers to build or catch up its replicas (snapshot catch-up,
// in every group), the time those copies waited for the node's move
// budget (--move-bytes-per-second), and the budget. A wait that grows as
// fast as time passes means the budget, not the peers or the disk, paces
// the copy (docs/operations.md, "Moving replicas").
type catchUpCollector struct{ b backend.StatsAPI }

var (
	descCatchUpBytes = prometheus.NewDesc("logd_catchup_bytes_total",
		"Segment bytes this node read from peers to build or catch up its replicas (snapshot catch-up, every group).", nil, nil)
	descCatchUpWait = prometheus.NewDesc("logd_catchup_throttle_wait_seconds_total",
		"Time this node's snapshot catch-up reads spent waiting for the move budget (--move-bytes-per-second).", nil, nil)
	descCatchUpLimit = prometheus.NewDesc("logd_catchup_limit_bytes_per_second",
		"This node's move budget (--move-bytes-per-second); 0: unbounded.", nil, nil)
)

func (c *catchUpCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descCatchUpBytes
	ch <- descCatchUpWait
	ch <- descCatchUpLimit
}

func (c *catchUpCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.b.CatchUpStats()
	ch <- prometheus.MustNewConstMetric(descCatchUpBytes, prometheus.CounterValue, float64(st.Bytes))
	ch <- prometheus.MustNewConstMetric(descCatchUpWait, prometheus.CounterValue, st.ThrottleWait.Seconds())
	ch <- prometheus.MustNewConstMetric(descCatchUpLimit, prometheus.GaugeValue, float64(st.BytesPerSecond))
}
