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

// boundsBackend describes a topic of two partitions, the second of data
// group 2, from a replica behind its leader.
type boundsBackend struct{ statusBackend }

func (b *boundsBackend) DescribeTopic(name string) (backend.TopicState, error) {
	return backend.TopicState{Topic: backend.TopicInfo{Name: name, Partitions: 2}, Partitions: []backend.PartitionState{
		{Partition: 0, EndOffset: 4}, {Partition: 1, EndOffset: 3, Group: 2},
	}}, nil
}
func (b *boundsBackend) OffsetsLeader(_ context.Context, _ string, p int32) (backend.Offsets, error) {
	return backend.Offsets{LogStart: 1, End: 7}, nil
}

// TestDescribeTopicConsistent: a consistent DescribeTopic gives the
// partitions of data groups their bounds at their groups' leaders (a
// consume's end offsets at its start); the meta group's partitions, and
// a describe without the header, as this node has them.
func TestDescribeTopicConsistent(t *testing.T) {
	srv := server.New(server.Options{Backend: &boundsBackend{}})
	for _, consistent := range []bool{false, true} {
		req := connect.NewRequest(&logdv1.DescribeTopicRequest{Name: "t"})
		if consistent {
			req.Header().Set(server.ConsistentReadHeader, "true")
		}
		resp, err := srv.DescribeTopic(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		p0, p1 := resp.Msg.Partitions[0], resp.Msg.Partitions[1]
		want1 := int64(3)
		if consistent {
			want1 = 7
		}
		if p0.EndOffset != 4 || p1.EndOffset != want1 {
			t.Errorf("consistent %v: ends %d and %d, want 4 and %d", consistent, p0.EndOffset, p1.EndOffset, want1)
		}
	}
}
