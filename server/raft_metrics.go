package server

import (
	"math"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/prometheus/client_golang/prometheus"
)

// raftPortCollector reports the node's Raft port at scrape time: its open
// connections, those it handed to Raft, and those it refused, by reason
// (package replication/transport, docs/security.md "Peers"). A stranger
// knocking on the Raft port shows here.
type raftPortCollector struct{ b backend.StatsAPI }

var (
	descRaftConnsOpen = prometheus.NewDesc("logd_raft_connections_open",
		"Connections accepted on the Raft port and open now, in their TLS handshake or serving Raft.", nil, nil)
	descRaftConnsAdmitted = prometheus.NewDesc("logd_raft_connections_admitted_total",
		"Raft connections the Raft port handed to Raft: streams of sessions, and connections of the previous framing.", nil, nil)
	descRaftSessions = prometheus.NewDesc("logd_raft_sessions_open",
		"Sessions of the Raft port open now, accepted and dialed (one per peer and direction).", nil, nil)
	descClusterSecret = prometheus.NewDesc("logd_cluster_secret_state",
		"Where the node stands with the cluster secret: 0 holds none, 1 holds it without requiring it yet (being handed over), 2 requires it of every peer.", nil, nil)
	descRaftConnsRefused = prometheus.NewDesc("logd_raft_connections_refused_total",
		"Connections the Raft port closed, by reason: cap (too many open), handshake (TLS failed: no certificate, not the cluster CA's, expired, not TLS), not_node (a certificate that is not a node's), not_member (a node outside the configuration), secret (the cluster secret not proven, or the previous framing from a node that holds one).",
		[]string{"reason"}, nil)
)

func (c *raftPortCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRaftConnsOpen
	ch <- descRaftConnsAdmitted
	ch <- descRaftConnsRefused
	ch <- descRaftSessions
	ch <- descClusterSecret
}

func (c *raftPortCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.b.RaftConnStats()
	ch <- prometheus.MustNewConstMetric(descRaftConnsOpen, prometheus.GaugeValue, float64(st.Open))
	ch <- prometheus.MustNewConstMetric(descRaftConnsAdmitted, prometheus.CounterValue, float64(st.Admitted))
	ch <- prometheus.MustNewConstMetric(descRaftSessions, prometheus.GaugeValue, float64(st.Sessions))
	ch <- prometheus.MustNewConstMetric(descClusterSecret, prometheus.GaugeValue, float64(st.Secret))
	for _, r := range []struct {
		reason string
		n      uint64
	}{{"cap", st.RefusedCap}, {"handshake", st.RefusedHandshake}, {"not_node", st.RefusedNotNode}, {"not_member", st.RefusedNotMember}, {"secret", st.RefusedSecret}} {
		ch <- prometheus.MustNewConstMetric(descRaftConnsRefused, prometheus.CounterValue, float64(r.n), r.reason)
	}
}

// raftCollector reports Raft's own measurements at scrape time
// (replication/observe): apply, log store and snapshot timings,
// the last snapshot's size, leader changes, whether a leader is known,
// each follower's lag as the leader sees it, and the data directory's
// file system.
type raftCollector struct {
	b   backend.API
	now func() time.Time
}

var (
	descRaftApply = prometheus.NewDesc("logd_raft_fsm_apply_duration_seconds",
		"Time a state machine took to apply each batch of committed Raft entries (the meta group and every data group replica of this node).", nil, nil)
	descRaftStoreLogs = prometheus.NewDesc("logd_raft_log_store_duration_seconds",
		"Time each write to a Raft log store took, fsync included (leader and followers; the meta group and every data group replica of this node).", nil, nil)
	descRaftSnapshotPersist = prometheus.NewDesc("logd_raft_snapshot_persist_duration_seconds",
		"Time each snapshot took to write and make durable, segment fsyncs included (the meta group and every data group replica of this node).", nil, nil)
	descRaftSnapshotBytes = prometheus.NewDesc("logd_raft_snapshot_bytes",
		"Size of this node's last snapshot of the meta group (its manifest, not the segments it names).", nil, nil)
	descRaftLeaderChanges = prometheus.NewDesc("logd_raft_leader_changes_total",
		"Leaders this node has seen elected, itself included.", nil, nil)
	descRaftLeaderKnown = prometheus.NewDesc("logd_raft_leader_known",
		"1 if this node knows a leader, 0 if not (an election, or a node cut off).", nil, nil)
	descRaftFollowerLag = prometheus.NewDesc("logd_raft_follower_index_lag",
		"On the leader: entries of its Raft log the follower did not have at its last answer.", []string{"peer"}, nil)
	descRaftFollowerContact = prometheus.NewDesc("logd_raft_follower_last_contact_seconds",
		"On the leader: seconds since the follower last answered; +Inf if it never answered this leader.", []string{"peer"}, nil)
	descDiskTotal = prometheus.NewDesc("logd_data_dir_fs_size_bytes",
		"Size of the file system holding the data directory.", nil, nil)
	descDiskAvail = prometheus.NewDesc("logd_data_dir_fs_avail_bytes",
		"Bytes of the data directory's file system logd may still write (free less the root reserve).", nil, nil)
)

func (c *raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRaftApply, descRaftStoreLogs, descRaftSnapshotPersist, descRaftSnapshotBytes, descRaftLeaderChanges,
		descRaftLeaderKnown, descRaftFollowerLag, descRaftFollowerContact, descDiskTotal, descDiskAvail} {
		ch <- d
	}
}

func (c *raftCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.b.RaftMetrics()
	bounds := backend.TimingBounds()
	hist := func(d *prometheus.Desc, t backend.Timings) {
		buckets := make(map[float64]uint64, len(bounds))
		for i, b := range bounds {
			buckets[b.Seconds()] = t.Buckets[i]
		}
		ch <- prometheus.MustNewConstHistogram(d, t.Count, t.Sum.Seconds(), buckets)
	}
	hist(descRaftApply, m.Apply)
	hist(descRaftStoreLogs, m.StoreLogs)
	hist(descRaftSnapshotPersist, m.SnapshotPersist)
	ch <- prometheus.MustNewConstMetric(descRaftSnapshotBytes, prometheus.GaugeValue, float64(m.SnapshotBytes))
	ch <- prometheus.MustNewConstMetric(descRaftLeaderChanges, prometheus.CounterValue, float64(m.LeaderChanges))
	known := 0.0
	if c.b.Status().LeaderID != "" {
		known = 1
	}
	ch <- prometheus.MustNewConstMetric(descRaftLeaderKnown, prometheus.GaugeValue, known)
	now := c.now()
	for _, f := range m.Followers {
		lag := 0.0
		if m.LastIndex > f.LastIndex {
			lag = float64(m.LastIndex - f.LastIndex)
		}
		ch <- prometheus.MustNewConstMetric(descRaftFollowerLag, prometheus.GaugeValue, lag, f.ID)
		contact := math.Inf(1)
		if !f.LastContact.IsZero() {
			contact = now.Sub(f.LastContact).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(descRaftFollowerContact, prometheus.GaugeValue, contact, f.ID)
	}
	if du, err := c.b.DiskUsage(); err == nil {
		ch <- prometheus.MustNewConstMetric(descDiskTotal, prometheus.GaugeValue, float64(du.Total))
		ch <- prometheus.MustNewConstMetric(descDiskAvail, prometheus.GaugeValue, float64(du.Avail))
	}
}
