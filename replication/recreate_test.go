package replication

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/batch"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
)

// TestRecreatedTopicInDataGroup: a topic deleted and created again while
// its data group still holds the earlier one (the group drops it and
// adopts the new one at its runner's next pass) is neither written to nor
// read from in the earlier one. Before, a produce was appended to the
// earlier topic and acknowledged, and the group then dropped it: an
// acknowledged record lost; a read answered the earlier topic's records.
func TestRecreatedTopicInDataGroup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, bk, describe := leadingDataNode(ctx, t, func(cfg *Config) { cfg.DataGroupsPerNode = 2 })
	one := func(v string) backend.ProduceRequest {
		return backend.ProduceRequest{Topic: "t", Records: []backend.ProduceRecord{{Partition: 0, HasPartition: true, Value: []byte(v)}}}
	}
	dg := placedTopic(ctx, t, n, "t")
	if res, err := bk.Produce(ctx, one("old")); err != nil || res.Results[0].Offset != 0 {
		t.Fatalf("produce to the first topic: %+v, %v", res, err)
	}

	// The group can neither drop nor adopt while the test holds this.
	dg.adoptMu.Lock()
	held := true
	defer func() {
		if held {
			dg.adoptMu.Unlock()
		}
	}()
	if err := bk.DeleteTopic(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := bk.CreateTopic(ctx, backend.CreateTopic{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if gt, err := dg.fsm.Topic("t"); err != nil || gt.CreateIndex == 0 {
		t.Fatalf("the group's topic t: %+v, %v: want the first one still there", gt, err)
	}
	// A read through the node answers no record of the first topic.
	r, err := bk.ReadRecords("t", 0, 0, 1<<20, 0)
	if err == nil && len(r.Batches) > 0 {
		recs, _ := batch.Records(r.Batches, 0, 0)
		t.Fatalf("a read of the new topic answered %d records of the one deleted (%q)", len(recs), recs[0].Value)
	}

	type outcome struct {
		res backend.ProduceResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := bk.Produce(ctx, one("new"))
		done <- outcome{res, err}
	}()
	var got outcome
	select {
	case got = <-done: // answered while the group held the first topic: it must not have written there
	case <-time.After(time.Second): // waiting for the group to adopt the new topic
	}
	dg.adoptMu.Unlock()
	held = false
	if got.res.Results == nil && got.err == nil {
		got = <-done
	}
	if got.err != nil {
		t.Fatalf("produce to the new topic: %v", got.err)
	}
	if off := got.res.Results[0].Offset; off != 0 {
		t.Fatalf("produce to the new topic answered offset %d, want 0 (the first record of the new topic)", off)
	}
	// The acknowledged record is there, in the new topic, once the group
	// holds only it.
	waitFor(ctx, t, "the new topic's record read back", func() bool {
		r, err := bk.ReadRecords("t", 0, 0, 1<<20, 0)
		if err != nil || len(r.Batches) == 0 {
			return false
		}
		recs, err := batch.Records(r.Batches, 0, 0)
		if err != nil || len(recs) != 1 || string(recs[0].Value) != "new" {
			t.Fatalf("read back %d records (%v): want the one record \"new\"", len(recs), err)
		}
		return true
	}, describe)
}

// leadingDataNode opens one node, with its configuration edited by
// configure (DataGroupsPerNode at least 1), and waits until it leads the
// meta group and every data group it runs; it closes when the test ends.
func leadingDataNode(ctx context.Context, t *testing.T, configure func(*Config)) (*Node, *Backend, func() string) {
	t.Helper()
	cfg := Config{NodeID: "n1", DataDir: t.TempDir(), RaftBind: "127.0.0.1:0", Bootstrap: true,
		Logger: fsmtest.Logger(), RaftLogLevel: "error"}
	configure(&cfg)
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	describe := func() string { return fmt.Sprintf("replicas %+v", n.DataGroupReplicas()) }
	waitFor(ctx, t, fmt.Sprintf("a node leading its %d data groups", cfg.DataGroupsPerNode), func() bool {
		return n.IsLeader() && n.Ready() && len(n.DataGroupReplicas()) == cfg.DataGroupsPerNode && leadsAll(n)
	}, describe)
	return n, NewBackend(n), describe
}

// placedTopic creates topic name with one partition on n and returns
// n's replica of the data group the partition is placed in.
func placedTopic(ctx context.Context, t *testing.T, n *Node, name string) *dataGroup {
	t.Helper()
	if _, err := NewBackend(n).CreateTopic(ctx, backend.CreateTopic{Name: name, Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	mt, err := n.FSM().Topic(name)
	if err != nil || mt.Placement == nil {
		t.Fatalf("topic %s: %+v, %v: want it placed in a data group", name, mt, err)
	}
	return n.dataGroup(mt.Placement[0])
}
