package server_test

import (
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/server"
)

// historyFollower is a follower whose leader cannot be reached: a call
// it forwarded would fail.
type historyFollower struct{ statusBackend }

func (b *historyFollower) IsLeader() bool                     { return false }
func (b *historyFollower) LeaderAPIAddress() (string, string) { return "127.0.0.1:1", "n9" }
func (b *historyFollower) Status() backend.Status {
	return backend.Status{NodeID: "n2", State: "Follower", LeaderID: "n9"}
}

// TestGetHistoryIsAnsweredByTheNodeAsked: a follower answers its own
// samples (none yet) with its own id and the bounds, never forwarding to
// the leader; a request naming two things is refused.
func TestGetHistoryIsAnsweredByTheNodeAsked(t *testing.T) {
	srv := httptest.NewServer(server.New(server.Options{Backend: &historyFollower{}}).Handler())
	defer srv.Close()
	rpc := logdv1connect.NewLogServiceClient(srv.Client(), srv.URL)
	resp, err := rpc.GetHistory(t.Context(), connect.NewRequest(&logdv1.GetHistoryRequest{Topic: "orders"}))
	if err != nil {
		t.Fatal(err)
	}
	if m := resp.Msg; m.NodeId != "n2" || m.IntervalMs != server.DefaultHistoryInterval.Milliseconds() ||
		m.Capacity != server.HistorySamples || len(m.Series) != 0 {
		t.Errorf("answer %v; want node n2's, interval 10000, capacity 90, no series yet", m)
	}
	_, err = rpc.GetHistory(t.Context(), connect.NewRequest(&logdv1.GetHistoryRequest{Topic: "orders", Group: "billing"}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("a topic and a consumer group: %v, want invalid_argument", err)
	}
}
