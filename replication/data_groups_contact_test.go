package replication

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/internal/nemesis"
)

// TestDataGroupReplicaOutOfTouch: a data-group replica that stops hearing
// from its group's leader stops serving reads (dataGroup.inContact), so a
// read through its node goes to the other replicas instead of answering,
// for as long as the cut lasts, what the replica held when it lost touch.
// n3's Raft port is reached through a proxy; cutting it leaves n3 able to
// call the others (reads over the Raft port) while no leader reaches n3.
// The group goes on taking writes with the other two replicas, and a read
// through n3 must see them. Healed, n3's replica catches up and serves
// again.
func TestDataGroupReplicaOutOfTouch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var proxy *nemesis.Proxy
	c := newJoinCluster(t)
	c.configure = func(id string, cfg *Config) {
		cfg.DataGroupsPerNode, cfg.ReplicationFactor = 1, 3
		if id != "n3" {
			return
		}
		// n3 binds a port known before it opens, so that the others
		// reach it through the proxy it advertises.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		bind := ln.Addr().String()
		if err := ln.Close(); err != nil {
			t.Fatal(err)
		}
		proxy, err = nemesis.StartProxy(bind, 1)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = proxy.Close() })
		cfg.RaftBind, cfg.RaftAdvertise = bind, proxy.Addr()
	}
	l := c.open(ctx, "n1", true)
	nodes := []*Node{l}
	for _, id := range []string{"n2", "n3"} {
		n := c.open(ctx, id, false)
		if err := l.Join(ctx, joinRequest(n), c.probe); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	n3 := nodes[2]
	describe := func() string {
		voters, leaders := dataGroupsView(nodes)
		return fmt.Sprintf("table %+v; voters %v; leaders %v", l.FSM().DataGroups(), voters, leaders)
	}
	waitFor(ctx, t, "three groups of three voters, each led by n1 or n2", func() bool {
		voters, leaders := dataGroupsView(nodes)
		if len(voters) != 3 || len(leaders) != 3 {
			return false
		}
		for g, v := range voters {
			if len(v) != 3 || leaders[g] == "n3" {
				if leaders[g] == "n3" {
					// Hand n3's group to another replica: the test
					// cuts n3 off from the leaders, not a leader off.
					if dg := n3.dataGroup(g); dg != nil {
						_ = dg.raft.LeadershipTransfer().Error()
					}
				}
				return false
			}
		}
		return true
	}, describe)
	b := NewBackend(l)
	if _, err := b.CreateTopic(ctx, backend.CreateTopic{Name: "cut", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	one := func(v string) []backend.ProduceRecord {
		return []backend.ProduceRecord{{Partition: 0, HasPartition: true, Value: []byte(v)}}
	}
	for i := range 3 {
		if _, err := b.Produce(ctx, backend.ProduceRequest{Topic: "cut", Records: one(fmt.Sprint("before-", i))}); err != nil {
			t.Fatal(err)
		}
	}
	waitOwnReplica(ctx, t, n3, "cut", 0, 3, describe)

	proxy.Set(nemesis.Link{Cut: nemesis.Refuse})
	for i := range 4 {
		if _, err := b.Produce(ctx, backend.ProduceRequest{Topic: "cut", Records: one(fmt.Sprint("after-", i))}); err != nil {
			t.Fatalf("produce with n3 cut off: %v", err)
		}
	}
	// n3's own replica still ends at 3: nothing reaches it.
	mt, _ := l.FSM().Topic("cut")
	g := mt.Placement[0]
	if dg := n3.dataGroup(g); dg == nil {
		t.Fatalf("n3 runs no replica of group %d: %s", g, describe())
	} else if part, err := dg.fsm.Partition("cut", 0); err != nil || part.Log().EndOffset() != 3 {
		t.Fatalf("n3's replica of group %d: %v; want it cut off at end 3", g, err)
	}
	// Once n3 has not heard from the group's leader for contactBound, a
	// read through n3 is served by another replica: the four records
	// written since. Until then it may still answer from its own.
	time.Sleep(contactBound + 200*time.Millisecond)
	for range 5 {
		r, err := NewBackend(n3).Read("cut", 0, 0, 1<<20)
		if err != nil {
			// No replica reached in time is an error, never the old end.
			t.Logf("read through n3 while cut off: %v", err)
			continue
		}
		if r.EndOffset != 7 {
			t.Fatalf("read through n3, out of touch with its group for %v: end %d, want 7 (another replica's); n3's replica answered what it had when cut off", contactBound, r.EndOffset)
		}
	}
	if o, err := NewBackend(n3).Offsets("cut", 0); err == nil && o.End != 7 {
		t.Fatalf("offsets through n3 while cut off: end %d, want 7", o.End)
	}

	proxy.Set(nemesis.Link{})
	waitOwnReplica(ctx, t, n3, "cut", 0, 7, describe)
	waitFor(ctx, t, "n3's replica serves again", func() bool {
		dg := n3.dataGroup(g)
		return dg != nil && dg.serves()
	}, describe)
}
