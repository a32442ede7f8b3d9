package server

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The history behind the console's charts (GetHistory, history_get.go;
// docs/console.md, "Charts"): every HistoryInterval the node reads its own
// metrics (the same numbers /metrics serves) and keeps, per topic,
// consumer group and queue group, a few derived series in fixed-size
// rings. Memory is bounded: at most MaxHistorySeries series of
// HistorySamples samples (16 bytes each), about 6 MiB at the cap. A
// series of something that disappeared (a deleted topic or group) is
// dropped at the next sample; a series beyond the cap is not kept.
// Nothing is persisted: a restarted node starts with empty charts.
//
// A node samples what it holds: with data groups it sees only the
// partitions of its own groups, so each series names the node that
// sampled it.
const (
	// DefaultHistoryInterval is how often the node samples by default.
	DefaultHistoryInterval = 10 * time.Second
	// HistorySamples is how many samples a series keeps: 15 minutes at
	// the default interval.
	HistorySamples = 90
	// MaxHistorySeries bounds the series kept; those of things first
	// seen once the cap is reached are left out until others go.
	MaxHistorySeries = 4096
)

// historyKey names one series: a topic's (topic), a consumer group's
// (group) or a queue group's (topic and queue), and what it samples.
type historyKey struct {
	topic, group, queue string
	name                string
}

// The series' names and units, as GetHistory answers them.
const (
	seriesProduceRate = "produce_rate"
	seriesConsumeRate = "consume_rate"
	seriesLagRecords  = "lag_records"
	seriesLagSeconds  = "lag_seconds"
	seriesBacklog     = "backlog_records"
	seriesBacklogAge  = "backlog_age_seconds"
)

// seriesUnit is the unit of each series name.
var seriesUnit = map[string]string{
	seriesProduceRate: "records/s", seriesConsumeRate: "records/s",
	seriesLagRecords: "records", seriesLagSeconds: "seconds",
	seriesBacklog: "records", seriesBacklogAge: "seconds",
}

// ring is one series' last HistorySamples samples.
type ring struct {
	timeMs [HistorySamples]int64
	values [HistorySamples]float64
	start  int // index of the oldest sample
	n      int
}

func (r *ring) push(ms int64, v float64) {
	i := (r.start + r.n) % HistorySamples
	r.timeMs[i], r.values[i] = ms, v
	if r.n < HistorySamples {
		r.n++
	} else {
		r.start = (r.start + 1) % HistorySamples
	}
}

// snapshot returns copies of the samples, oldest first.
func (r *ring) snapshot() ([]int64, []float64) {
	ts, vs := make([]int64, r.n), make([]float64, r.n)
	for k := range r.n {
		i := (r.start + k) % HistorySamples
		ts[k], vs[k] = r.timeMs[i], r.values[i]
	}
	return ts, vs
}

// counterSample is a counter's last raw value, from which the next
// sample's rate is computed.
type counterSample struct {
	ms int64
	v  float64
}

// history owns the rings. sample is called by RunHistory's goroutine,
// get by handlers.
type history struct {
	interval time.Duration

	mu     sync.Mutex
	series map[historyKey]*ring         // guarded by mu
	prev   map[historyKey]counterSample // guarded by mu: rates' last raw values
}

func newHistory(interval time.Duration) *history {
	if interval <= 0 {
		interval = DefaultHistoryInterval
	}
	return &history{interval: interval, series: make(map[historyKey]*ring), prev: make(map[historyKey]counterSample)}
}

// aggregate reads the metric families into this sample's values: gauges
// (summed, or the maximum for ages) and counters (summed, whose rates
// sample takes).
func aggregate(families []*dto.MetricFamily) (gauges, counters map[historyKey]float64) {
	gauges, counters = make(map[historyKey]float64), make(map[historyKey]float64)
	for _, f := range families {
		for _, m := range f.GetMetric() {
			l := make(map[string]string, len(m.GetLabel()))
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			switch f.GetName() {
			case "logd_partition_end_offset":
				counters[historyKey{topic: l["topic"], name: seriesProduceRate}] += v
			case "logd_group_committed_offset":
				k := historyKey{group: l["group"], name: seriesConsumeRate}
				counters[k] += math.Max(v, 0) // -1: nothing committed
			case "logd_group_lag_records":
				gauges[historyKey{group: l["group"], name: seriesLagRecords}] += v
			case "logd_group_lag_seconds":
				k := historyKey{group: l["group"], name: seriesLagSeconds}
				gauges[k] = math.Max(gauges[k], v)
			case "logd_queue_acked_total":
				counters[historyKey{topic: l["topic"], queue: l["group"], name: seriesConsumeRate}] += v
			case "logd_queue_backlog_records":
				gauges[historyKey{topic: l["topic"], queue: l["group"], name: seriesBacklog}] += v
			case "logd_queue_oldest_unfinished_age_seconds":
				k := historyKey{topic: l["topic"], queue: l["group"], name: seriesBacklogAge}
				gauges[k] = math.Max(gauges[k], v)
			}
		}
	}
	return gauges, counters
}

// sample records one sample taken at now from the metric families. It
// returns how many series the cap left out.
func (h *history) sample(now time.Time, families []*dto.MetricFamily) (over int) {
	gauges, counters := aggregate(families)
	ms := now.UnixMilli()
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := make(map[historyKey]bool, len(gauges)+len(counters))
	for k, v := range gauges {
		seen[k] = true
		if !h.push(k, ms, v) {
			over++
		}
	}
	for k, v := range counters {
		seen[k] = true
		p, ok := h.prev[k]
		h.prev[k] = counterSample{ms: ms, v: v}
		if !ok || ms <= p.ms {
			continue // a rate needs two samples
		}
		// A counter that went back (an offset reset, a node that lost a
		// partition) counts as no progress, not as a negative rate.
		if !h.push(k, ms, math.Max(v-p.v, 0)/(float64(ms-p.ms)/1e3)) {
			over++
		}
	}
	for k := range h.series {
		if !seen[k] {
			delete(h.series, k)
		}
	}
	for k := range h.prev {
		if !seen[k] {
			delete(h.prev, k)
		}
	}
	return over
}

// push appends to k's ring, making it unless the cap is reached (then
// it returns false). h.mu is held.
func (h *history) push(k historyKey, ms int64, v float64) bool {
	r := h.series[k]
	if r == nil {
		if len(h.series) >= MaxHistorySeries {
			return false
		}
		r = &ring{}
		h.series[k] = r
	}
	r.push(ms, v)
	return true
}

// get returns copies of the samples of the series names of one thing, in
// the order of names; a series not kept is left out.
func (h *history) get(topic, group, queue string, names ...string) []historySamples {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []historySamples
	for _, n := range names {
		r := h.series[historyKey{topic: topic, group: group, queue: queue, name: n}]
		if r == nil || r.n == 0 {
			continue
		}
		ts, vs := r.snapshot()
		out = append(out, historySamples{name: n, timeMs: ts, values: vs})
	}
	return out
}

// historySamples is one series as get copies it out.
type historySamples struct {
	name   string
	timeMs []int64
	values []float64
}

// RunHistory samples the node's metrics every Options.HistoryInterval
// (default 10 s) for GetHistory until ctx ends, and returns then. The
// caller runs it on a goroutine of its own and waits for it before it
// closes the backend. Without it GetHistory answers no series.
func (s *Server) RunHistory(ctx context.Context) {
	t := time.NewTicker(s.history.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.sampleHistory(now, s.reg)
		}
	}
}

// sampleHistory takes one sample from the registry.
func (s *Server) sampleHistory(now time.Time, g prometheus.Gatherer) {
	families, err := g.Gather()
	if err != nil && len(families) == 0 {
		s.logger.Warn("history: read the metrics", "err", err)
		return
	}
	if over := s.history.sample(now, families); over > 0 {
		s.logger.Warn("history: series over the cap are not kept", "left_out", over, "max_series", MaxHistorySeries)
	}
}
