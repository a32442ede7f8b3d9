package server_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication"
)

// TestListTopicsStats: asked for stats, ListTopics sums each topic's
// partitions (offsets held, bytes, segments, end offsets); without the
// flag it answers no stats, as before.
func TestListTopicsStats(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	n, srv, _ := testServer(t, ctx)
	for _, c := range []backend.CreateTopic{{Name: "a", Partitions: 2}, {Name: "b", Partitions: 1}} {
		if _, err := replication.NewBackend(n).CreateTopic(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	produce := func(p int32, values ...string) {
		t.Helper()
		var recs []*logdv1.Record
		for _, v := range values {
			recs = append(recs, &logdv1.Record{Value: []byte(v), Partition: &p})
		}
		if _, err := srv.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "a", Records: recs})); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, "x", "y", "z")
	produce(1, "w")

	resp, err := srv.ListTopics(ctx, connect.NewRequest(&logdv1.ListTopicsRequest{Stats: true}))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*logdv1.TopicStats{}
	for _, ti := range resp.Msg.Topics {
		got[ti.Name] = ti.Stats
	}
	desc, err := srv.DescribeTopic(ctx, connect.NewRequest(&logdv1.DescribeTopicRequest{Name: "a"}))
	if err != nil {
		t.Fatal(err)
	}
	var bytes int64
	var segments int32
	for _, p := range desc.Msg.Partitions {
		bytes += p.Bytes
		segments += p.Segments
	}
	if a := got["a"]; a.GetRecords() != 4 || a.GetEndOffsets() != 4 || a.GetBytes() != bytes || bytes == 0 || a.GetSegments() != segments {
		t.Errorf("a: %v; want 4 records, 4 end offsets, %d bytes, %d segments", a, bytes, segments)
	}
	if b := got["b"]; b == nil || b.Records != 0 || b.EndOffsets != 0 {
		t.Errorf("b: %v; want stats of an empty topic", b)
	}

	plain, err := srv.ListTopics(ctx, connect.NewRequest(&logdv1.ListTopicsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(plain.Msg.Topics) != 2 || plain.Msg.Topics[0].Stats != nil {
		t.Errorf("without stats: %v", plain.Msg.Topics)
	}
}
