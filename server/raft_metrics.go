package server

import (
	"github.com/prometheus/client_golang/prometheus"
)

// raftPortCollector reports the node's Raft port at scrape time: its open
// connections, those it handed to Raft, and those it refused, by reason
// (replication/raft_stream.go, docs/security.md "Peers"). A stranger
// knocking on the Raft port shows here.
type raftPortCollector struct{ b StatsBackend }

var (
	descRaftConnsOpen = prometheus.NewDesc("logd_raft_connections_open",
		"Connections accepted on the Raft port and open now, in their TLS handshake or serving Raft.", nil, nil)
	descRaftConnsAdmitted = prometheus.NewDesc("logd_raft_connections_admitted_total",
		"Connections the Raft port handed to Raft.", nil, nil)
	descRaftConnsRefused = prometheus.NewDesc("logd_raft_connections_refused_total",
		"Connections the Raft port closed, by reason: cap (too many open), handshake (TLS failed: no certificate, not the cluster CA's, expired, not TLS), not_node (a certificate that is not a node's), not_member (a node outside the configuration).",
		[]string{"reason"}, nil)
)

func (c *raftPortCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRaftConnsOpen
	ch <- descRaftConnsAdmitted
	ch <- descRaftConnsRefused
}

func (c *raftPortCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.b.RaftConnStats()
	ch <- prometheus.MustNewConstMetric(descRaftConnsOpen, prometheus.GaugeValue, float64(st.Open))
	ch <- prometheus.MustNewConstMetric(descRaftConnsAdmitted, prometheus.CounterValue, float64(st.Admitted))
	for _, r := range []struct {
		reason string
		n      uint64
	}{{"cap", st.RefusedCap}, {"handshake", st.RefusedHandshake}, {"not_node", st.RefusedNotNode}, {"not_member", st.RefusedNotMember}} {
		ch <- prometheus.MustNewConstMetric(descRaftConnsRefused, prometheus.CounterValue, float64(r.n), r.reason)
	}
}
