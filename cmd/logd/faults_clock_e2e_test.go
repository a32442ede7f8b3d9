package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/internal/e2e"
)

// TestClockOffset: a node started with LOGD_FAULT_CLOCK_OFFSET stamps
// records (and every command it leads) with its shifted clock; the same
// node without it stamps the real time.
func TestClockOffset(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nd := e2e.NewNode(t, "n1")
	for i, tc := range []struct {
		offset string
		want   time.Duration
	}{
		{offset: "", want: 0},
		{offset: "-3h", want: -3 * time.Hour},
	} {
		topic := fmt.Sprintf("clock%d", i)
		nd.Kill()
		nd.LaunchWith("", "LOGD_FAULT_CLOCK_OFFSET="+tc.offset)
		e2e.WaitFor(t, ctx, "n1 leads", func() bool {
			st, err := nd.Status(ctx)
			return err == nil && st.Ready && st.State == "Leader"
		})
		e2e.CreateTopic(t, ctx, nd, topic, 1, nil)
		before := time.Now()
		if _, err := nd.RPC.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: topic, Records: []*logdv1.Record{{Value: []byte("v")}}})); err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		recs := nd.ReadAll(ctx, topic, 1)[0]
		if len(recs) != 1 {
			t.Fatalf("offset %q: read %d records", tc.offset, len(recs))
		}
		ts := time.UnixMilli(recs[0].TimestampMs)
		if lo, hi := before.Add(tc.want).Add(-time.Millisecond), after.Add(tc.want).Add(time.Millisecond); ts.Before(lo) || ts.After(hi) {
			t.Errorf("offset %q: record stamped %v, want within [%v, %v]", tc.offset, ts, lo, hi)
		}
	}
}
