package server

import (
	"context"
	"errors"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"github.com/logd-dev/logd/backend"
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests   *prometheus.CounterVec   // by procedure and code
	latency    *prometheus.HistogramVec // by procedure
	records    *prometheus.CounterVec   // produced/fetched records by op
	bytes      *prometheus.CounterVec   // produced/fetched value+key bytes by op
	commitTime prometheus.Histogram     // propose -> committed and applied

	dedupDuplicates prometheus.Counter // records answered as duplicates
	dedupConflicts  prometheus.Counter // calls refused: key reused with another payload
}

func newMetrics(reg *prometheus.Registry, b backend.API) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "logd_requests_total", Help: "API requests by procedure and result code.",
		}, []string{"procedure", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "logd_request_duration_seconds", Help: "API request latency by procedure.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}, []string{"procedure"}),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "logd_records_total", Help: "Records produced or fetched.",
		}, []string{"op"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "logd_record_bytes_total", Help: "Encoded record bytes produced or fetched.",
		}, []string{"op"}),
		commitTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "logd_raft_commit_duration_seconds", Help: "Time from proposing an append to its commit and apply.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}),
	}
	m.dedupDuplicates = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "logd_idempotency_duplicates_total", Help: "Records answered as duplicates of a key in the idempotency window (nothing appended).",
	})
	m.dedupConflicts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "logd_idempotency_conflicts_total", Help: "Produce calls refused because an idempotency key was reused with a different payload.",
	})
	reg.MustRegister(m.requests, m.latency, m.records, m.bytes, m.commitTime, m.dedupDuplicates, m.dedupConflicts, &stateCollector{b: b},
		&cleanerCollector{b: b},                                       // cleaner_metrics.go
		&catchUpCollector{b: b},                                       // catchup_metrics.go
		&raftPortCollector{b: b}, &raftCollector{b: b, now: time.Now}) // raft_metrics.go
	return m
}

func (m *metrics) interceptor() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			start := time.Now()
			resp, err := next(ctx, req)
			proc := req.Spec().Procedure
			code := "ok"
			var ce *connect.Error
			if errors.As(err, &ce) {
				code = ce.Code().String()
			} else if err != nil {
				code = connect.CodeUnknown.String()
			}
			m.requests.WithLabelValues(proc, code).Inc()
			m.latency.WithLabelValues(proc).Observe(time.Since(start).Seconds())
			return resp, err
		}
	}
}

// stateCollector reports Raft state and per-partition offsets at scrape
// time, so nothing is updated on the hot path.
type stateCollector struct{ b backend.API }

var (
	descRaftState    = prometheus.NewDesc("logd_raft_state", "1 for the node's current Raft state.", []string{"state"}, nil)
	descRaftIndex    = prometheus.NewDesc("logd_raft_index", "Raft indexes: commit, applied, last.", []string{"kind"}, nil)
	descRaftTerm     = prometheus.NewDesc("logd_raft_term", "Current Raft term.", nil, nil)
	descPartEnd      = prometheus.NewDesc("logd_partition_end_offset", "Next offset to be assigned.", []string{"topic", "partition"}, nil)
	descPartStart    = prometheus.NewDesc("logd_partition_log_start_offset", "First offset held.", []string{"topic", "partition"}, nil)
	descPartBytes    = prometheus.NewDesc("logd_partition_bytes", "Bytes held by the partition's segments.", []string{"topic", "partition"}, nil)
	descDedupKeys    = prometheus.NewDesc("logd_idempotency_keys", "Idempotency keys held in the topic's window.", []string{"topic"}, nil)
	descDedupEvicted = prometheus.NewDesc("logd_idempotency_keys_evicted_total", "Keys evicted before their window ended because the topic reached idempotency.max.keys.", []string{"topic"}, nil)
	descDedupExpired = prometheus.NewDesc("logd_idempotency_keys_expired_total", "Keys dropped at the end of their window.", []string{"topic"}, nil)
	descNodeFailed   = prometheus.NewDesc("logd_node_failed", "1 if the node stopped after a state-machine I/O error.", nil, nil)
	descGroupLeader  = prometheus.NewDesc("logd_data_group_leader", "1 if this node leads the data group, for each group it holds a replica of.", []string{"group"}, nil)
	descGroupIndex   = prometheus.NewDesc("logd_data_group_index", "Raft indexes of this node's replica of the data group: commit, applied.", []string{"group", "kind"}, nil)
	descGroupTerm    = prometheus.NewDesc("logd_data_group_term", "Raft term of this node's replica of the data group.", []string{"group"}, nil)
	descGroupMoves   = prometheus.NewDesc("logd_data_group_moves", "Data group replica moves in progress, as the table of data groups this node applied marks them.", nil, nil)
	descMoveOldest   = prometheus.NewDesc("logd_data_group_move_oldest_seconds", "Age of the oldest data group replica move in progress (0: none), by this node's clock.", nil, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRaftState, descRaftIndex, descRaftTerm, descPartEnd, descPartStart, descPartBytes, descNodeFailed, descDedupKeys, descDedupEvicted, descDedupExpired,
		descGroupLeader, descGroupIndex, descGroupTerm, descGroupMoves, descMoveOldest} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.b.Status()
	for _, s := range backend.RaftStates() {
		v := 0.0
		if s == st.State {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descRaftState, prometheus.GaugeValue, v, s)
	}
	ch <- prometheus.MustNewConstMetric(descRaftIndex, prometheus.GaugeValue, float64(st.CommitIndex), "commit")
	ch <- prometheus.MustNewConstMetric(descRaftIndex, prometheus.GaugeValue, float64(st.AppliedIndex), "applied")
	ch <- prometheus.MustNewConstMetric(descRaftIndex, prometheus.GaugeValue, float64(st.LastLogIndex), "last")
	ch <- prometheus.MustNewConstMetric(descRaftTerm, prometheus.GaugeValue, float64(st.Term))
	// Moves from the table, which every node applied: every node reports
	// them, whatever replicas it holds.
	moves, oldest := 0, time.Duration(0)
	for _, g := range st.DataGroups {
		if g.Move != nil {
			moves++
			oldest = max(oldest, c.b.Now().Sub(g.Move.Since))
		}
	}
	ch <- prometheus.MustNewConstMetric(descGroupMoves, prometheus.GaugeValue, float64(moves))
	ch <- prometheus.MustNewConstMetric(descMoveOldest, prometheus.GaugeValue, oldest.Seconds())
	for _, g := range st.DataGroups {
		if g.State == "" {
			continue // no replica here
		}
		id := strconv.FormatUint(g.ID, 10)
		leads := 0.0
		if g.State == "Leader" {
			leads = 1
		}
		ch <- prometheus.MustNewConstMetric(descGroupLeader, prometheus.GaugeValue, leads, id)
		ch <- prometheus.MustNewConstMetric(descGroupIndex, prometheus.GaugeValue, float64(g.CommitIndex), id, "commit")
		ch <- prometheus.MustNewConstMetric(descGroupIndex, prometheus.GaugeValue, float64(g.AppliedIndex), id, "applied")
		ch <- prometheus.MustNewConstMetric(descGroupTerm, prometheus.GaugeValue, float64(g.Term), id)
	}
	failed := 0.0
	if c.b.Failed() != nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(descNodeFailed, prometheus.GaugeValue, failed)
	for _, t := range c.b.TopicStates() {
		name, ds := t.Topic.Name, t.Idempotency
		ch <- prometheus.MustNewConstMetric(descDedupKeys, prometheus.GaugeValue, float64(ds.Keys), name)
		ch <- prometheus.MustNewConstMetric(descDedupEvicted, prometheus.CounterValue, float64(ds.Evicted), name)
		ch <- prometheus.MustNewConstMetric(descDedupExpired, prometheus.CounterValue, float64(ds.Expired), name)
		for _, p := range t.Partitions {
			part := strconv.Itoa(int(p.Partition))
			ch <- prometheus.MustNewConstMetric(descPartEnd, prometheus.GaugeValue, float64(p.EndOffset), name, part)
			ch <- prometheus.MustNewConstMetric(descPartStart, prometheus.GaugeValue, float64(p.LogStartOffset), name, part)
			ch <- prometheus.MustNewConstMetric(descPartBytes, prometheus.GaugeValue, float64(p.Bytes), name, part)
		}
	}
}
