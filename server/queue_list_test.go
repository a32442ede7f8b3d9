package server_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
)

// TestListQueueGroupsAndGroupLag checks the two lists the console's
// groups and queues pages read (docs/console.md): ListQueueGroups
// describes every queue group, or a topic's, sorted; ListGroups sums a
// consumer group's lag.
func TestListQueueGroupsAndGroupLag(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hs, _ := probeEnv(t, true)
	c := logdv1connect.NewLogServiceClient(hs.Client(), hs.URL)
	for _, name := range []string{"b", "a"} {
		if _, err := c.CreateTopic(ctx, connect.NewRequest(&logdv1.CreateTopicRequest{Name: name, Partitions: 2})); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range [][2]string{{"b", "w2"}, {"b", "w1"}, {"a", "w3"}} {
		if _, err := c.CreateQueueGroup(ctx, connect.NewRequest(&logdv1.CreateQueueGroupRequest{Topic: q[0], Group: q[1]})); err != nil {
			t.Fatal(err)
		}
	}
	recs := []*logdv1.Record{{Value: []byte("x"), Partition: new(int32)}, {Value: []byte("y"), Partition: new(int32)}, {Value: []byte("z"), Partition: new(int32)}}
	if _, err := c.Produce(ctx, connect.NewRequest(&logdv1.ProduceRequest{Topic: "b", Records: recs})); err != nil {
		t.Fatal(err)
	}

	names := func(r *logdv1.ListQueueGroupsResponse) []string {
		var out []string
		for _, g := range r.Groups {
			out = append(out, g.Topic+"/"+g.Group)
		}
		return out
	}
	all, err := c.ListQueueGroups(ctx, connect.NewRequest(&logdv1.ListQueueGroupsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if got := names(all.Msg); len(got) != 3 || got[0] != "a/w3" || got[1] != "b/w1" || got[2] != "b/w2" {
		t.Fatalf("ListQueueGroups = %v, want [a/w3 b/w1 b/w2]", got)
	}
	one, err := c.ListQueueGroups(ctx, connect.NewRequest(&logdv1.ListQueueGroupsRequest{Topic: "b"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := names(one.Msg); len(got) != 2 {
		t.Fatalf("ListQueueGroups(b) = %v, want b's two", got)
	}
	var ready int64
	for _, p := range one.Msg.Groups[0].Partitions {
		ready += p.Ready
	}
	if ready != 3 || len(one.Msg.Groups[0].Partitions) != 2 || one.Msg.Groups[0].Config.GetMaxDeliveries() == 0 {
		t.Errorf("b/w1: %d ready over %d partitions, config %v; want 3 over 2 with defaults", ready, len(one.Msg.Groups[0].Partitions), one.Msg.Groups[0].Config)
	}
	if _, err := c.ListQueueGroups(ctx, connect.NewRequest(&logdv1.ListQueueGroupsRequest{Topic: "bad name"})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("a bad topic name: %v, want INVALID_ARGUMENT", err)
	}

	// A group that committed 1 of partition 0's three records lags by 2.
	join, err := c.JoinGroup(ctx, connect.NewRequest(&logdv1.JoinGroupRequest{Group: "g", MemberId: "m", Topics: []string{"b"}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CommitOffsets(ctx, connect.NewRequest(&logdv1.CommitOffsetsRequest{Group: "g", MemberId: "m", Generation: join.Msg.Assignment.Generation,
		Offsets: []*logdv1.GroupOffset{{Topic: "b", Partition: 0, Offset: 1}}})); err != nil {
		t.Fatal(err)
	}
	groups, err := c.ListGroups(ctx, connect.NewRequest(&logdv1.ListGroupsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(groups.Msg.Groups) != 1 || groups.Msg.Groups[0].LagRecords != 2 || groups.Msg.Groups[0].MaxLagSeconds < 0 {
		t.Fatalf("ListGroups = %v, want g lagging 2 records", groups.Msg.Groups)
	}
}
