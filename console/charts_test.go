package console_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/client"
	"github.com/logd-dev/logd/logdtest"
)

// drawnSeries is one chart's polyline as the page drew it.
type drawnSeries struct {
	Series string `json:"series"`
	Node   string `json:"node"`
	Count  string `json:"count"`
	Times  string `json:"times"`
	Values string `json:"values"`
	Points int    `json:"points"`
}

// TestChartsDrawTheNodesSamples checks the charts of the last 15 minutes
// on the topic, consumer group and queue group pages against GetHistory:
// one chart per series the API answers, each polyline with one point per
// sample, and every sample drawn is one the node answers (same time, same
// value), labelled with the node that sampled it. No pixels are read.
func TestChartsDrawTheNodesSamples(t *testing.T) {
	node := logdtest.Start(t, logdtest.Options{HistoryInterval: 500 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := client.New(node.URL(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rpc := logdv1connect.NewLogServiceClient(http.DefaultClient, node.URL())
	if _, err := cl.CreateTopic(ctx, "orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateQueueGroup(ctx, "orders", "workers", client.QueueGroupConfig{}, false); err != nil {
		t.Fatal(err)
	}
	produce := func(n int) {
		var recs []client.Record
		for i := range n {
			recs = append(recs, client.Record{Value: fmt.Appendf(nil, "order-%d", i)})
		}
		if _, err := cl.Produce(ctx, "orders", recs); err != nil {
			t.Fatal(err)
		}
	}
	produce(10)
	join, err := rpc.JoinGroup(ctx, connect.NewRequest(&logdv1.JoinGroupRequest{Group: "billing", MemberId: "m-billing",
		Topics: []string{"orders"}, SessionTimeoutMs: 60_000}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rpc.CommitOffsets(ctx, connect.NewRequest(&logdv1.CommitOffsetsRequest{Group: "billing", MemberId: "m-billing",
		Generation: join.Msg.Assignment.Generation, Offsets: []*logdv1.GroupOffset{{Topic: "orders", Partition: 0, Offset: 1}}})); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		route string
		req   *logdv1.GetHistoryRequest
		want  []string // the series, in the page's order
	}{
		{name: "topic", route: "/topics/orders", req: &logdv1.GetHistoryRequest{Topic: "orders"}, want: []string{"produce_rate"}},
		{name: "consumer group", route: "/groups/billing", req: &logdv1.GetHistoryRequest{Group: "billing"},
			want: []string{"consume_rate", "lag_records", "lag_seconds"}},
		{name: "queue group", route: "/queues/orders/workers", req: &logdv1.GetHistoryRequest{Topic: "orders", QueueGroup: "workers"},
			want: []string{"consume_rate", "backlog_records", "backlog_age_seconds"}},
	}
	p := newPage(t, node)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p.t = t
			p.open(tc.route)
			produce(5) // a produce rate above zero in the next samples
			// Every series has a rate, which takes two samples; wait for three.
			cgPoll(p, "three samples in every chart", fmt.Sprintf(`(() => {
				const ls = document.querySelectorAll('#history polyline');
				return ls.length === %d && Array.from(ls).every(l => Number(l.dataset.count) >= 3); })()`, len(tc.want)))
			p.waitText("#history-note", "node-1")
			var drawn []drawnSeries
			p.eval(`Array.from(document.querySelectorAll('#history polyline')).map(l => ({series: l.dataset.series, node: l.dataset.node,
				count: l.dataset.count, times: l.dataset.times, values: l.dataset.values,
				points: l.getAttribute('points').trim().split(/\s+/).length}))`, &drawn)
			resp, err := rpc.GetHistory(ctx, connect.NewRequest(tc.req))
			if err != nil {
				t.Fatal(err)
			}
			answered := map[string]map[int64]float64{}
			for _, s := range resp.Msg.Series {
				m := map[int64]float64{}
				for i, ms := range s.TimeMs {
					m[ms] = s.Values[i]
				}
				answered[s.Name] = m
			}
			var names []string
			for _, d := range drawn {
				names = append(names, d.Series)
				times, values := strings.Split(d.Times, ","), strings.Split(d.Values, ",")
				if n, _ := strconv.Atoi(d.Count); n != d.Points || n != len(times) || n != len(values) {
					t.Errorf("%s: data-count %s, %d points, %d times, %d values: not one point per sample", d.Series, d.Count, d.Points, len(times), len(values))
				}
				if d.Node != "node-1" {
					t.Errorf("%s: sampled by %q, want node-1", d.Series, d.Node)
				}
				for i := range times {
					ms, _ := strconv.ParseInt(times[i], 10, 64)
					v, _ := strconv.ParseFloat(values[i], 64)
					if got, ok := answered[d.Series][ms]; !ok || got != v {
						t.Errorf("%s: the page drew %v at %d; the API answers %v (present: %v)", d.Series, v, ms, got, ok)
					}
				}
			}
			if !slices.Equal(names, tc.want) {
				t.Errorf("charts %v, want %v", names, tc.want)
			}
		})
	}
}
