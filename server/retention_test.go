package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/replication"
	"github.com/logd-dev/logd/replication/replicationtest"
	"github.com/logd-dev/logd/server"
)

// testServer is a single-node Raft group and a Server over it, called
// directly (no HTTP); reg holds the server's metrics.
func testServer(t *testing.T, ctx context.Context) (*replication.Node, *server.Server, *prometheus.Registry) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	n := replicationtest.Start(t, replicationtest.Options{})
	reg := prometheus.NewRegistry()
	return n.Node, server.New(server.Options{Backend: n.Backend, Logger: logger, Registry: reg}), reg
}

func keyed(t *testing.T, ts int64, kv ...string) []byte {
	t.Helper()
	var recs []batch.Record
	for i := 0; i < len(kv); i += 2 {
		recs = append(recs, batch.Record{Timestamp: ts, Key: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	b, err := batch.Build(recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reasonOf returns the ErrorInfo reason of a handler error.
func reasonOf(err error) logdv1.Reason {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return logdv1.Reason_REASON_UNSPECIFIED
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if info, ok := v.(*logdv1.ErrorInfo); ok {
				return info.Reason
			}
		}
	}
	return logdv1.Reason_REASON_UNSPECIFIED
}

// TestCompactedTopic: after a compaction, a fetch continues after the gap
// that ends a batch, and describe and the metrics show the run.
func TestCompactedTopic(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	n, srv, reg := testServer(t, ctx)
	if _, err := replication.NewBackend(n).CreateTopic(ctx, backend.CreateTopic{Name: "c", Partitions: 1, Config: map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "100"}}); err != nil {
		t.Fatal(err)
	}
	ts := time.Now().Add(-time.Second).UnixMilli()
	// One segment per batch: [0-2] [3] [4, active]. Compaction drops k3=c
	// at offset 2, the end of the first batch.
	for _, b := range [][]byte{keyed(t, ts, "k1", "a", "k2", "b", "k3", "c"), keyed(t, ts, "k3", "d"), keyed(t, ts, "k4", "e")} {
		if _, err := replication.NewBackend(n).Append(ctx, backend.Append{Topic: "c", Batches: []backend.PartitionBatch{{Partition: 0, Batch: b}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Clean(ctx); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name       string
		req        *logdv1.FetchRequest
		offsets    []int64
		nextOffset int64
	}{
		// One batch (max_bytes below its size): continue after it, not at
		// 2, where the next fetch would return nothing.
		{name: "one batch", req: &logdv1.FetchRequest{Offset: 0, MaxBytes: 1}, offsets: []int64{0, 1}, nextOffset: 3},
		{name: "record limit inside the batch", req: &logdv1.FetchRequest{Offset: 0, MaxRecords: 1}, offsets: []int64{0}, nextOffset: 1},
		{name: "from inside the gap", req: &logdv1.FetchRequest{Offset: 2, MaxBytes: 1}, nextOffset: 3},
		{name: "everything", req: &logdv1.FetchRequest{Offset: 0}, offsets: []int64{0, 1, 3, 4}, nextOffset: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Topic = "c"
			resp, err := srv.Fetch(ctx, connect.NewRequest(tc.req))
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, r := range resp.Msg.Records {
				got = append(got, r.Offset)
			}
			if !slices.Equal(got, tc.offsets) {
				t.Fatalf("offsets %v, want %v", got, tc.offsets)
			}
			if resp.Msg.NextOffset != tc.nextOffset {
				t.Fatalf("next offset %d, want %d", resp.Msg.NextOffset, tc.nextOffset)
			}
		})
	}

	d, err := srv.DescribeTopic(ctx, connect.NewRequest(&logdv1.DescribeTopicRequest{Name: "c"}))
	if err != nil {
		t.Fatal(err)
	}
	p := d.Msg.Partitions[0]
	if p.CompactedSegments != 2 || p.Segments != 3 || p.LastCleanerRun.GetAction() != "compact" || p.LastCleanerRun.GetRecordsRemoved() != 1 ||
		p.LastCleanerRun.GetTimeMs() <= ts || p.LastCleanerRun.GetBytesDeleted() <= 0 {
		t.Fatalf("partition %v", p)
	}
	want := map[string]float64{"logd_cleaner_compactions_total": 1, "logd_cleaner_records_compacted_total": 1, "logd_cleaner_passes_total": 1, "logd_cleaner_trims_total": 0}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		w, ok := want[mf.GetName()]
		if !ok {
			continue
		}
		if v := mf.GetMetric()[0].GetCounter().GetValue(); v != w {
			t.Errorf("%s = %v, want %v", mf.GetName(), v, w)
		}
		delete(want, mf.GetName())
	}
	if len(want) > 0 {
		t.Errorf("metrics missing: %v", want)
	}
}

// TestAlterTopicHandler: typed errors for bad input, and the effective
// settings on success.
func TestAlterTopicHandler(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	n, srv, _ := testServer(t, ctx)
	if _, err := replication.NewBackend(n).CreateTopic(ctx, backend.CreateTopic{Name: "a", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		req     *logdv1.AlterTopicRequest
		reason  logdv1.Reason
		message string
		want    map[string]string
	}{
		{name: "set", req: &logdv1.AlterTopicRequest{Name: "a", Config: map[string]string{"retention.ms": "5", "cleanup.policy": "compact,delete"}},
			want: map[string]string{"retention.ms": "5", "cleanup.policy": "compact,delete", "segment.bytes": "1073741824"}},
		{name: "reset", req: &logdv1.AlterTopicRequest{Name: "a", DeleteConfig: []string{"retention.ms"}},
			want: map[string]string{"retention.ms": "604800000", "cleanup.policy": "compact,delete"}},
		{name: "no name", req: &logdv1.AlterTopicRequest{Config: map[string]string{"retention.ms": "5"}}, reason: logdv1.Reason_REASON_INVALID_ARGUMENT},
		{name: "unknown topic", req: &logdv1.AlterTopicRequest{Name: "b", Config: map[string]string{"retention.ms": "5"}}, reason: logdv1.Reason_REASON_UNKNOWN_TOPIC},
		{name: "nothing", req: &logdv1.AlterTopicRequest{Name: "a"}, reason: logdv1.Reason_REASON_INVALID_ARGUMENT},
		{name: "unknown key", req: &logdv1.AlterTopicRequest{Name: "a", Config: map[string]string{"retention.minutes": "5"}},
			reason: logdv1.Reason_REASON_INVALID_ARGUMENT, message: `unknown key "retention.minutes"`},
		{name: "bad value", req: &logdv1.AlterTopicRequest{Name: "a", Config: map[string]string{"cleanup.policy": "shred"}},
			reason: logdv1.Reason_REASON_INVALID_ARGUMENT, message: "must be delete, compact or compact,delete"},
		{name: "segment too large", req: &logdv1.AlterTopicRequest{Name: "a", Config: map[string]string{"segment.bytes": "4294967296"}},
			reason: logdv1.Reason_REASON_INVALID_ARGUMENT, message: "at most 4 GiB-1"},
		{name: "set and reset", req: &logdv1.AlterTopicRequest{Name: "a", Config: map[string]string{"retention.ms": "5"}, DeleteConfig: []string{"retention.ms"}},
			reason: logdv1.Reason_REASON_INVALID_ARGUMENT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := n.FSM().Topic("a")
			resp, err := srv.AlterTopic(ctx, connect.NewRequest(tc.req))
			if tc.reason != logdv1.Reason_REASON_UNSPECIFIED {
				if got := reasonOf(err); got != tc.reason || !strings.Contains(errString(err), tc.message) {
					t.Fatalf("error %v (reason %v), want reason %v with %q", err, got, tc.reason, tc.message)
				}
				if after, _ := n.FSM().Topic("a"); after != before {
					t.Fatal("a refused alter changed the topic")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.want {
				if got := resp.Msg.Topic.Config[k]; got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
