package server_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/replicationtest"
	"github.com/logd-dev/logd/server"
)

// TestCreatePartitionsHandler: a topic grows, a growth to the count it
// has succeeds without change, and every refusal (shrink, the per-topic
// limit, the cluster's partition quota counting what is added, a missing
// topic or name) has its reason and changes nothing; validate_only checks
// without growing.
func TestCreatePartitionsHandler(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	n := replicationtest.Start(t, replicationtest.Options{Quota: backend.TopicQuota{MaxPartitions: 6}})
	srv := server.New(server.Options{Backend: n.Backend, Logger: logger, Registry: prometheus.NewRegistry()})
	for _, name := range []string{"a", "other"} {
		if _, err := n.Backend.CreateTopic(ctx, backend.CreateTopic{Name: name, Partitions: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name     string
		req      *logdv1.CreatePartitionsRequest
		reason   logdv1.Reason
		code     connect.Code
		message  string
		previous int32
		want     int32 // the count afterwards
	}{
		{name: "validate only", req: &logdv1.CreatePartitionsRequest{Name: "a", Count: 3, ValidateOnly: true}, previous: 1, want: 1},
		{name: "grow", req: &logdv1.CreatePartitionsRequest{Name: "a", Count: 3}, previous: 1, want: 3},
		{name: "same count", req: &logdv1.CreatePartitionsRequest{Name: "a", Count: 3}, previous: 3, want: 3},
		{name: "shrink", req: &logdv1.CreatePartitionsRequest{Name: "a", Count: 2}, reason: logdv1.Reason_REASON_INVALID_ARGUMENT,
			code: connect.CodeInvalidArgument, message: "a has 3 partitions and cannot shrink to 2", want: 3},
		{name: "shrink, validate only", req: &logdv1.CreatePartitionsRequest{Name: "a", Count: 2, ValidateOnly: true}, reason: logdv1.Reason_REASON_INVALID_ARGUMENT,
			code: connect.CodeInvalidArgument, message: "cannot shrink", want: 3},
		{name: "above the limit", req: &logdv1.CreatePartitionsRequest{Name: "a", Count: 10_001}, reason: logdv1.Reason_REASON_INVALID_ARGUMENT,
			code: connect.CodeInvalidArgument, message: "above the limit of 10000 per topic", want: 3},
		// 4 partitions in all: 3 more would pass the quota of 6.
		{name: "quota", req: &logdv1.CreatePartitionsRequest{Name: "a", Count: 6}, reason: logdv1.Reason_REASON_INVALID_ARGUMENT,
			code: connect.CodeResourceExhausted, message: "quota of 6", want: 3},
		{name: "quota, validate only", req: &logdv1.CreatePartitionsRequest{Name: "a", Count: 6, ValidateOnly: true}, reason: logdv1.Reason_REASON_INVALID_ARGUMENT,
			code: connect.CodeResourceExhausted, message: "quota of 6", want: 3},
		{name: "up to the quota", req: &logdv1.CreatePartitionsRequest{Name: "a", Count: 5}, previous: 3, want: 5},
		{name: "unknown topic", req: &logdv1.CreatePartitionsRequest{Name: "b", Count: 2}, reason: logdv1.Reason_REASON_UNKNOWN_TOPIC, code: connect.CodeNotFound, want: 5},
		{name: "no name", req: &logdv1.CreatePartitionsRequest{Count: 2}, reason: logdv1.Reason_REASON_INVALID_ARGUMENT, code: connect.CodeInvalidArgument, want: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			applied := n.FSM().AppliedIndex()
			resp, err := srv.CreatePartitions(ctx, connect.NewRequest(tc.req))
			after, _ := n.FSM().Topic("a")
			if got := int32(len(after.Partitions)); got != tc.want {
				t.Fatalf("a has %d partitions, want %d", got, tc.want)
			}
			if tc.reason != logdv1.Reason_REASON_UNSPECIFIED {
				if got := reasonOf(err); got != tc.reason || connect.CodeOf(err) != tc.code || !strings.Contains(errString(err), tc.message) {
					t.Fatalf("error %v (reason %v), want %v %v with %q", err, got, tc.code, tc.reason, tc.message)
				}
				if n.FSM().AppliedIndex() != applied {
					t.Fatal("a refused growth proposed an entry")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.Msg.Topic.Partitions != tc.want || resp.Msg.PreviousCount != tc.previous {
				t.Fatalf("response: %d partitions, previously %d; want %d, %d", resp.Msg.Topic.Partitions, resp.Msg.PreviousCount, tc.want, tc.previous)
			}
		})
	}
}
