package server_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/server"
)

// readsBackend lets every member fetch and counts which read served it.
type readsBackend struct {
	statusBackend
	leaderReads, replicaReads int
}

func (b *readsBackend) AwaitGroupFetch(context.Context, backend.GroupFetchCheck, time.Duration) error {
	return nil
}
func (b *readsBackend) Offsets(string, int32) (backend.Offsets, error) {
	return backend.Offsets{LogStart: 0, End: 5}, nil
}
func (b *readsBackend) ReadLeader(context.Context, string, int32, int64, int) (backend.ReadResult, error) {
	b.leaderReads++
	return backend.ReadResult{EndOffset: 5}, nil
}
func (b *readsBackend) ReadRecords(string, int32, int64, int, int) (backend.ReadResult, error) {
	b.replicaReads++
	return backend.ReadResult{EndOffset: 5}, nil
}

// TestGroupFetchConsistent: a group fetch with the consistent header reads
// as a consistent fetch does (at a data group's leader, ReadLeader); one
// without reads this node's state.
func TestGroupFetchConsistent(t *testing.T) {
	b := &readsBackend{}
	srv := server.New(server.Options{Backend: b})
	for _, consistent := range []bool{true, false} {
		req := connect.NewRequest(&logdv1.GroupFetchRequest{Group: "g", MemberId: "m", Generation: 1,
			Fetch: &logdv1.FetchRequest{Topic: "t", Partition: 0, Offset: 3}})
		if consistent {
			req.Header().Set(server.ConsistentReadHeader, "true")
		}
		if _, err := srv.GroupFetch(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	if b.leaderReads != 1 || b.replicaReads != 1 {
		t.Errorf("leader reads %d, replica reads %d; want 1 each (the consistent fetch at the leader)", b.leaderReads, b.replicaReads)
	}
}
