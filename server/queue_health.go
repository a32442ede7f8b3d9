package server

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
)

// Queue health: what a queue group's backlog looks like, for
// describe, `logctl queue top` and /metrics. Counts and ages come from the
// replicated state; rates are measured by this node between describes
// (queueRates), and admission refusals are counted by the node that
// refused.

// queueHealth owns the per-node parts of queue health.
type queueHealth struct {
	refusals *prometheus.CounterVec // by topic and group

	mu sync.Mutex
	// rates holds each partition's last baseline and rates; guarded by mu.
	rates map[rateKey]*rateState
	// refused counts refusals by topic and group, for describe; guarded
	// by mu.
	refused map[[2]string]int64
}

type rateKey struct {
	topic, group string
	partition    int32
}

// rateState is a baseline sample and the rates measured against the one
// before it.
type rateState struct {
	at                          time.Time
	acked, nacked, expired, dlq int64
	rates                       [4]float64
}

// minRateWindow is the shortest interval a rate is measured over; describes
// closer together reuse the last rates.
const minRateWindow = time.Second

func newQueueHealth(reg *prometheus.Registry, b backend.API) *queueHealth {
	h := &queueHealth{
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "logd_queue_admission_refusals_total",
			Help: "Produce calls this node refused as overloaded because a queue group's backlog bound was reached.",
		}, []string{"topic", "group"}),
		rates:   map[rateKey]*rateState{},
		refused: map[[2]string]int64{},
	}
	reg.MustRegister(h.refusals, &queueCollector{b: b})
	return h
}

// refusal counts a produce refused as overloaded. Its retry-after hint
// comes with it from the state machine (fsm.OverloadedError: the excess
// over the bound at the group's replicated drain rate, the same on every
// node); clients add their own jitter.
func (h *queueHealth) refusal(err error) {
	var oe *backend.OverloadedError
	if !errors.As(err, &oe) {
		return
	}
	h.refusals.WithLabelValues(oe.Topic, oe.Group).Inc()
	h.mu.Lock()
	h.refused[[2]string{oe.Topic, oe.Group}]++
	h.mu.Unlock()
}

// refusedCount returns the refusals counted for a group.
func (h *queueHealth) refusedCount(topic, group string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refused[[2]string{topic, group}]
}

// observe measures a partition's rates from its counters at now and sets
// them on ps.
func (h *queueHealth) observe(topic, group string, ps *logdv1.QueuePartitionState, now time.Time) {
	k := rateKey{topic, group, ps.Partition}
	cur := [4]int64{ps.Acked, ps.Nacked, ps.Expired, ps.DeadLettered}
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.rates[k]
	switch {
	case st == nil:
		h.rates[k] = &rateState{at: now, acked: cur[0], nacked: cur[1], expired: cur[2], dlq: cur[3]}
	case now.Sub(st.at) >= minRateWindow:
		secs := now.Sub(st.at).Seconds()
		prev := [4]int64{st.acked, st.nacked, st.expired, st.dlq}
		for i := range cur {
			st.rates[i] = float64(max(cur[i]-prev[i], 0)) / secs
		}
		st.at, st.acked, st.nacked, st.expired, st.dlq = now, cur[0], cur[1], cur[2], cur[3]
	}
	if st = h.rates[k]; st != nil {
		ps.AckedPerSec, ps.NackedPerSec, ps.ExpiredPerSec, ps.DeadLetteredPerSec = st.rates[0], st.rates[1], st.rates[2], st.rates[3]
	}
}

// queueCollector reports every queue group's state at scrape time.
type queueCollector struct{ b backend.API }

var (
	queueLabels          = []string{"topic", "group", "partition"}
	descQueueReady       = prometheus.NewDesc("logd_queue_ready_records", "Records ready for delivery (fresh ones included).", queueLabels, nil)
	descQueueInFlight    = prometheus.NewDesc("logd_queue_in_flight_records", "Records under a live lease.", queueLabels, nil)
	descQueueDelayed     = prometheus.NewDesc("logd_queue_delayed_records", "Records waiting out a backoff.", queueLabels, nil)
	descQueueDeadPending = prometheus.NewDesc("logd_queue_dead_pending_records", "Records decided for the dead-letter topic, not yet moved.", queueLabels, nil)
	descQueueOldestReady = prometheus.NewDesc("logd_queue_oldest_ready_age_seconds", "Age of the oldest ready record (by its timestamp); 0 when none.", queueLabels, nil)
	descQueueOldestLease = prometheus.NewDesc("logd_queue_oldest_in_flight_age_seconds", "How long the longest live lease has run; 0 when none.", queueLabels, nil)
	descQueueAcked       = prometheus.NewDesc("logd_queue_acked_total", "Records acknowledged (completions); rate() gives the completion rate.", queueLabels, nil)
	descQueueNacked      = prometheus.NewDesc("logd_queue_nacked_total", "Negative acknowledgements accepted.", queueLabels, nil)
	descQueueExpired     = prometheus.NewDesc("logd_queue_expired_leases_total", "Leases that expired (counted when a claim settles them).", queueLabels, nil)
	descQueueDeadLetters = prometheus.NewDesc("logd_queue_dead_lettered_total", "Records moved to the dead-letter topic.", queueLabels, nil)
	descQueuePaused      = prometheus.NewDesc("logd_queue_paused", "1 while the queue group is paused.", []string{"topic", "group"}, nil)
	descQueueDLQRecords  = prometheus.NewDesc("logd_queue_dead_letter_topic_records", "Records held by the group's dead-letter topic; its growth is the alert signal.", []string{"topic", "group", "dead_letter_topic"}, nil)

	groupLabels               = []string{"topic", "group"}
	descQueueBacklogRecords   = prometheus.NewDesc("logd_queue_backlog_records", "Unfinished records of the group, as admission control counts them (queue.max.backlog.records).", groupLabels, nil)
	descQueueBacklogBytes     = prometheus.NewDesc("logd_queue_backlog_bytes", "Sum of the sizes (key, value, headers) of the group's unfinished records, as admission control counts them (queue.max.backlog.bytes).", groupLabels, nil)
	descQueueOldestUnfinished = prometheus.NewDesc("logd_queue_oldest_unfinished_age_seconds", "Time since the append of the group's oldest unfinished record (queue.max.backlog.age.ms bounds it); 0 when none.", groupLabels, nil)
	descQueueMaxBacklogAge    = prometheus.NewDesc("logd_queue_max_backlog_age_seconds", "The topic's queue.max.backlog.age.ms in seconds; -1 when unbounded.", groupLabels, nil)
	descQueueDrainRate        = prometheus.NewDesc("logd_queue_drain_records_per_second", "Records acknowledged or dead-lettered per second over the last 10 s or more, from the replicated counters (retry-after hints derive from it).", groupLabels, nil)
)

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueueReady, descQueueInFlight, descQueueDelayed, descQueueDeadPending, descQueueOldestReady,
		descQueueOldestLease, descQueueAcked, descQueueNacked, descQueueExpired, descQueueDeadLetters, descQueuePaused, descQueueDLQRecords,
		descQueueBacklogRecords, descQueueBacklogBytes, descQueueOldestUnfinished, descQueueMaxBacklogAge, descQueueDrainRate} {
		ch <- d
	}
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now().UnixNano()
	for _, t := range c.b.Topics() {
		for _, name := range c.b.QueueGroups(t.Name) {
			info, err := c.b.DescribeQueueGroup(t.Name, name, now)
			if err != nil {
				continue // deleted meanwhile
			}
			paused := 0.0
			if info.Paused {
				paused = 1
			}
			ch <- prometheus.MustNewConstMetric(descQueuePaused, prometheus.GaugeValue, paused, t.Name, name)
			ch <- prometheus.MustNewConstMetric(descQueueDLQRecords, prometheus.GaugeValue, float64(deadLetterRecords(c.b, info.Config.DeadLetterTopic)), t.Name, name, info.Config.DeadLetterTopic)
			maxAge := -1.0
			if info.MaxBacklogAgeMs >= 0 {
				maxAge = float64(info.MaxBacklogAgeMs) / 1e3
			}
			for d, v := range map[*prometheus.Desc]float64{
				descQueueBacklogRecords:   float64(info.Backlog.Records),
				descQueueBacklogBytes:     float64(info.Backlog.Bytes),
				descQueueOldestUnfinished: ageSeconds(now, info.OldestAppend),
				descQueueMaxBacklogAge:    maxAge,
				descQueueDrainRate:        info.DrainPerSec,
			} {
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, t.Name, name)
			}
			for _, p := range info.Partitions {
				l := []string{t.Name, name, strconv.Itoa(int(p.Partition))}
				gauge := func(d *prometheus.Desc, v float64) {
					ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
				}
				counter := func(d *prometheus.Desc, v int64) {
					ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
				}
				gauge(descQueueReady, float64(p.Ready))
				gauge(descQueueInFlight, float64(p.InFlight))
				gauge(descQueueDelayed, float64(p.Delayed))
				gauge(descQueueDeadPending, float64(p.DeadPending))
				gauge(descQueueOldestReady, ageSeconds(now, p.OldestReadyTimestamp))
				gauge(descQueueOldestLease, ageSeconds(now, p.OldestInFlightSince))
				counter(descQueueAcked, p.Acked)
				counter(descQueueNacked, p.Nacked)
				counter(descQueueExpired, p.Expired)
				counter(descQueueDeadLetters, p.DeadLettered)
			}
		}
	}
}

func ageSeconds(now, since int64) float64 {
	if since <= 0 || now <= since {
		return 0
	}
	return float64(now-since) / 1e9
}

// deadLetterRecords is the record count of a dead-letter topic (end minus
// start over its partitions), 0 if it is missing.
func deadLetterRecords(b backend.API, topic string) int64 {
	t, err := b.Topic(topic)
	if err != nil {
		return 0
	}
	var n int64
	for p := range t.Partitions {
		if o, err := b.Offsets(topic, p); err == nil {
			n += o.End - o.LogStart
		}
	}
	return n
}
