package server_test

import (
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/server"
)

// statusBackend is a leader as Status sees it: its Raft view, what it
// last heard from each follower and its disk. Other calls are not
// implemented (the embedded nil Backend panics).
type statusBackend struct {
	backend.API
	metrics backend.RaftMetrics
	disk    error
}

func (b *statusBackend) NodeID() string                       { return "n1" }
func (b *statusBackend) APIAddress() string                   { return "n1:7070" }
func (b *statusBackend) Ready() bool                          { return true }
func (b *statusBackend) Failed() error                        { return nil }
func (b *statusBackend) IsLeader() bool                       { return true }
func (b *statusBackend) LeaderAPIAddress() (string, string)   { return "n1:7070", "n1" }
func (b *statusBackend) NodeAPIAddress(string) (string, bool) { return "", false }
func (b *statusBackend) MemberAPIAddresses() []string         { return nil }
func (b *statusBackend) RaftMetrics() backend.RaftMetrics     { return b.metrics }

func (b *statusBackend) Status() backend.Status {
	return backend.Status{NodeID: "n1", State: "Leader", LeaderID: "n1", LastLogIndex: b.metrics.LastIndex}
}

func (b *statusBackend) DiskUsage() (backend.DiskUsage, error) {
	if b.disk != nil {
		return backend.DiskUsage{}, b.disk
	}
	return backend.DiskUsage{Total: 1000, Free: 600, Avail: 500}, nil
}

// TestStatusReportsFollowersAndDisk: Status answers the leader's view of
// each follower (lag in entries, age of its last answer, unset when it
// never answered), the leader changes seen, and the data directory's
// file system, which it leaves unset where the platform cannot tell.
func TestStatusReportsFollowersAndDisk(t *testing.T) {
	b := &statusBackend{metrics: backend.RaftMetrics{LeaderChanges: 3, LastIndex: 100, Followers: []backend.FollowerStats{
		{ID: "n2", LastIndex: 90, LastContact: time.Now().Add(-2 * time.Second)},
		{ID: "n3"},
		{ID: "n4", LastIndex: 120, LastContact: time.Now()},
	}}}
	srv := httptest.NewServer(server.New(server.Options{Backend: b}).Handler())
	defer srv.Close()
	rpc := logdv1connect.NewLogServiceClient(srv.Client(), srv.URL)

	resp, err := rpc.Status(t.Context(), connect.NewRequest(&logdv1.StatusRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	st := resp.Msg
	if st.LeaderChanges != 3 {
		t.Errorf("leader changes %d, want 3", st.LeaderChanges)
	}
	if len(st.Followers) != 3 {
		t.Fatalf("followers %v, want 3", st.Followers)
	}
	n2, n3, n4 := st.Followers[0], st.Followers[1], st.Followers[2]
	if n2.Id != "n2" || n2.LastIndex != 90 || n2.Lag != 10 || n2.LastContactAgeMs == nil ||
		*n2.LastContactAgeMs < 2000 || *n2.LastContactAgeMs > 60_000 {
		t.Errorf("n2: %v; want lag 10, last contact about 2 s ago", n2)
	}
	if n3.Id != "n3" || n3.Lag != 100 || n3.LastContactAgeMs != nil {
		t.Errorf("n3: %v; want lag 100, never contacted", n3)
	}
	if n4.Lag != 0 {
		t.Errorf("n4 ahead of the leader's last index: lag %d, want 0", n4.Lag)
	}
	if st.Disk.GetTotalBytes() != 1000 || st.Disk.GetAvailBytes() != 500 {
		t.Errorf("disk %v, want total 1000, avail 500", st.Disk)
	}

	noStatfs := httptest.NewServer(server.New(server.Options{Backend: &statusBackend{disk: errors.ErrUnsupported}}).Handler())
	defer noStatfs.Close()
	rpc = logdv1connect.NewLogServiceClient(noStatfs.Client(), noStatfs.URL)
	resp, err = rpc.Status(t.Context(), connect.NewRequest(&logdv1.StatusRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Msg.Disk != nil {
		t.Errorf("disk %v without statfs, want unset", resp.Msg.Disk)
	}
}
