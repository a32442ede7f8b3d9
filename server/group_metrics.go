package server

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
)

// groupMetrics are the consumer group metrics: fenced commits and fetches
// counted by this node as it refuses them, and the replicated state (committed
// offsets, lag, rebalances) read at scrape time by groupCollector.
type groupMetrics struct {
	fencedCommits *prometheus.CounterVec // by group
	fencedFetches *prometheus.CounterVec // by group
}

func newGroupMetrics(reg *prometheus.Registry, b backend.API) *groupMetrics {
	m := &groupMetrics{
		fencedCommits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "logd_group_fenced_commits_total",
			Help: "Offset commits refused because the member's generation was stale or it was no longer a member.",
		}, []string{"group"}),
		fencedFetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "logd_group_fenced_fetches_total",
			Help: "Group fetches refused because the member's generation was stale, it did not own the partition, or it was no longer a member.",
		}, []string{"group"}),
	}
	reg.MustRegister(m.fencedCommits, m.fencedFetches, &groupCollector{b: b})
	return m
}

// forget drops a deleted group's series.
func (m *groupMetrics) forget(group string) {
	m.fencedCommits.DeleteLabelValues(group)
	m.fencedFetches.DeleteLabelValues(group)
}

// groupCollector reports each consumer group's state at scrape time.
type groupCollector struct{ b backend.API }

var (
	descGroupCommitted   = prometheus.NewDesc("logd_group_committed_offset", "Committed offset (next offset to read) per group and partition; -1 for none.", []string{"group", "topic", "partition"}, nil)
	descGroupLagRecords  = prometheus.NewDesc("logd_group_lag_records", "Records not yet committed by the group.", []string{"group", "topic", "partition"}, nil)
	descGroupLagSeconds  = prometheus.NewDesc("logd_group_lag_seconds", "Age of the oldest record not yet committed by the group.", []string{"group", "topic", "partition"}, nil)
	descGroupSkipped     = prometheus.NewDesc("logd_group_skipped_records_total", "Records skipped by the reset policy after retention passed the committed offset.", []string{"group", "topic", "partition"}, nil)
	descGroupRebalances  = prometheus.NewDesc("logd_group_rebalances_total", "Membership-driven reassignments of the group.", []string{"group"}, nil)
	descGroupGeneration  = prometheus.NewDesc("logd_group_generation", "The group's generation.", []string{"group"}, nil)
	descGroupMembers     = prometheus.NewDesc("logd_group_members", "Live members of the group.", []string{"group"}, nil)
	descGroupResets      = prometheus.NewDesc("logd_group_offset_resets_total", "Explicit offset resets applied to the group.", []string{"group"}, nil)
	descGroupRebalancing = prometheus.NewDesc("logd_group_rebalancing", "1 while the group is rebalancing.", []string{"group"}, nil)
)

func (c *groupCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descGroupCommitted, descGroupLagRecords, descGroupLagSeconds, descGroupSkipped, descGroupRebalances, descGroupGeneration, descGroupMembers, descGroupResets, descGroupRebalancing} {
		ch <- d
	}
}

func (c *groupCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	// The groups this node holds: asking other nodes at every scrape
	// would cost a call per data group; each group is reported by each
	// replica of its home.
	for _, g := range c.b.LocalConsumerGroups() {
		if group.Internal(g.Name) {
			// A redrive job's position: its lag would read as an
			// application falling behind; the job reports its own
			// progress (DescribeRedrive).
			continue
		}
		ch <- prometheus.MustNewConstMetric(descGroupRebalances, prometheus.CounterValue, float64(g.Rebalances), g.Name)
		ch <- prometheus.MustNewConstMetric(descGroupGeneration, prometheus.GaugeValue, float64(g.Generation), g.Name)
		ch <- prometheus.MustNewConstMetric(descGroupMembers, prometheus.GaugeValue, float64(len(g.Members)), g.Name)
		ch <- prometheus.MustNewConstMetric(descGroupResets, prometheus.CounterValue, float64(g.OffsetResets), g.Name)
		rebalancing := 0.0
		if g.State() == "rebalancing" {
			rebalancing = 1
		}
		ch <- prometheus.MustNewConstMetric(descGroupRebalancing, prometheus.GaugeValue, rebalancing, g.Name)
		for _, name := range g.TopicNames() {
			for i, cp := range g.Topics[name].Partitions {
				lag, ok := lagOf(c.b, name, int32(i), cp.Committed, now)
				if !ok {
					continue
				}
				p := strconv.Itoa(i)
				ch <- prometheus.MustNewConstMetric(descGroupCommitted, prometheus.GaugeValue, float64(cp.Committed), g.Name, name, p)
				ch <- prometheus.MustNewConstMetric(descGroupLagRecords, prometheus.GaugeValue, float64(lag.Records), g.Name, name, p)
				ch <- prometheus.MustNewConstMetric(descGroupLagSeconds, prometheus.GaugeValue, lag.Seconds, g.Name, name, p)
				ch <- prometheus.MustNewConstMetric(descGroupSkipped, prometheus.CounterValue, float64(cp.Skipped), g.Name, name, p)
			}
		}
	}
}
