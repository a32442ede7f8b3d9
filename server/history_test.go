package server

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// historyMetrics builds the metric families one sample reads: end
// offsets per partition of topic orders, the committed offsets and lag of
// group billing, and the ack counter and backlog age of queue group
// workers of orders.
func historyMetrics(t *testing.T, ends [2]float64, committed float64, acked, ageSeconds float64) []*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewRegistry()
	end := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "logd_partition_end_offset"}, []string{"topic", "partition"})
	end.WithLabelValues("orders", "0").Set(ends[0])
	end.WithLabelValues("orders", "1").Set(ends[1])
	comm := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "logd_group_committed_offset"}, []string{"group", "topic", "partition"})
	comm.WithLabelValues("billing", "orders", "0").Set(committed)
	comm.WithLabelValues("billing", "orders", "1").Set(-1) // nothing committed
	lag := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "logd_group_lag_seconds"}, []string{"group", "topic", "partition"})
	lag.WithLabelValues("billing", "orders", "0").Set(3)
	lag.WithLabelValues("billing", "orders", "1").Set(7)
	ack := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "logd_queue_acked_total"}, []string{"topic", "group", "partition"})
	ack.WithLabelValues("orders", "workers", "0").Add(acked)
	age := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "logd_queue_oldest_unfinished_age_seconds"}, []string{"topic", "group"})
	age.WithLabelValues("orders", "workers").Set(ageSeconds)
	reg.MustRegister(end, comm, lag, ack, age)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

func TestHistorySamplesRatesGaugesAndBounds(t *testing.T) {
	h := newHistory(10 * time.Second)
	t0 := time.UnixMilli(1_700_000_000_000)
	h.sample(t0, historyMetrics(t, [2]float64{10, 20}, 5, 0, 1))
	// A rate needs two samples; a gauge has one at once.
	if got := h.get("orders", "", "", seriesProduceRate); len(got) != 0 {
		t.Errorf("a produce rate after one sample: %v", got)
	}
	if got := h.get("", "billing", "", seriesLagSeconds); len(got) != 1 || !slices.Equal(got[0].values, []float64{7}) {
		t.Errorf("lag seconds after one sample: %+v, want the partitions' maximum [7]", got)
	}
	h.sample(t0.Add(10*time.Second), historyMetrics(t, [2]float64{60, 70}, 3, 50, 2))
	tests := []struct {
		name                string
		topic, group, queue string
		series              string
		want                []float64
	}{
		{name: "produce rate: 100 records in 10 s", topic: "orders", series: seriesProduceRate, want: []float64{10}},
		{name: "commit rate: an offset moved back is no progress", group: "billing", series: seriesConsumeRate, want: []float64{0}},
		{name: "ack rate", topic: "orders", queue: "workers", series: seriesConsumeRate, want: []float64{5}},
		{name: "backlog age", topic: "orders", queue: "workers", series: seriesBacklogAge, want: []float64{1, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := h.get(tc.topic, tc.group, tc.queue, tc.series)
			if len(got) != 1 || !slices.Equal(got[0].values, tc.want) {
				t.Fatalf("got %+v, want values %v", got, tc.want)
			}
		})
	}

	// The ring keeps the last HistorySamples samples, oldest first.
	for i := range HistorySamples + 5 {
		h.sample(t0.Add(time.Duration(20+10*i)*time.Second), historyMetrics(t, [2]float64{60, 70}, 3, 50, float64(i)))
	}
	got := h.get("orders", "", "workers", seriesBacklogAge)
	if len(got) != 1 || len(got[0].values) != HistorySamples || got[0].values[0] != 5 || got[0].values[HistorySamples-1] != HistorySamples+4 {
		t.Fatalf("after %d samples the ring holds %d, from %v to %v; want %d from 5", HistorySamples+7, len(got[0].values),
			got[0].values[0], got[0].values[len(got[0].values)-1], HistorySamples)
	}
	if !slices.IsSorted(got[0].timeMs) {
		t.Error("samples not oldest first")
	}

	// What disappears from the metrics (a deleted topic) is dropped.
	h.sample(t0.Add(time.Hour), nil)
	if n := len(h.series); n != 0 {
		t.Errorf("%d series kept after every source went", n)
	}
}

// TestHistoryKeepsAtMostMaxHistorySeries: the series of things first seen
// once the cap is reached are not kept.
func TestHistoryKeepsAtMostMaxHistorySeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	age := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "logd_queue_oldest_unfinished_age_seconds"}, []string{"topic", "group"})
	for i := range MaxHistorySeries + 10 {
		age.WithLabelValues("t", strconv.Itoa(i)).Set(1)
	}
	reg.MustRegister(age)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	h := newHistory(0)
	over := h.sample(time.UnixMilli(1), fams)
	if n := len(h.series); n != MaxHistorySeries || over != 10 {
		t.Errorf("%d series kept, %d left out; want %d and 10", n, over, MaxHistorySeries)
	}
}
