package replication

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
)

// memCluster is an in-process cluster of InMemory nodes whose Raft
// transports the test connects and cuts, link by link.
type memCluster struct {
	t     *testing.T
	nodes []*Node
}

// memRaftTimeout is the in-memory clusters' heartbeat, election and lease
// timeout: short, so failovers are quick, but long enough that a leader
// on two loaded cores (the race detector, the other packages' tests) does
// not lose its lease between heartbeats, which the tests that expect n1 to
// lead would see as "not the leader".
const memRaftTimeout = 150 * time.Millisecond

// newMemCluster starts n InMemory nodes, n1 bootstrapping, and makes the
// others voters.
func newMemCluster(t *testing.T, ctx context.Context, n int) *memCluster {
	t.Helper()
	c := &memCluster{t: t}
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		nd, err := Open(Config{NodeID: id, RaftBind: id, DataDir: t.TempDir(), InMemory: true, Bootstrap: i == 0,
			APIAdvertise: id + "-api", Logger: fsmtest.Logger(), RaftLogLevel: "off",
			HeartbeatTimeout: memRaftTimeout, ElectionTimeout: memRaftTimeout, LeaderLeaseTimeout: memRaftTimeout})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := nd.Close(); err != nil {
				t.Error(err)
			}
		})
		c.nodes = append(c.nodes, nd)
	}
	for i := range c.nodes {
		for j := range c.nodes {
			if i != j {
				c.link(i, j, true)
			}
		}
	}
	first := c.nodes[0]
	c.waitFor(ctx, "n1 leads", func() bool { return first.IsLeader() && first.Ready() })
	for _, nd := range c.nodes[1:] {
		if err := first.raft.AddVoter(raft.ServerID(nd.NodeID()), raft.ServerAddress(nd.NodeID()), 0, 0).Error(); err != nil {
			t.Fatal(err)
		}
	}
	c.waitFor(ctx, "followers ready", func() bool {
		for _, nd := range c.nodes[1:] {
			if !nd.Ready() {
				return false
			}
		}
		return true
	})
	return c
}

func (c *memCluster) transport(i int) *raft.InmemTransport {
	return c.nodes[i].stores.transport.(*raft.InmemTransport)
}

// link connects (or cuts) the Raft link from node i to node j.
func (c *memCluster) link(i, j int, up bool) {
	peer := raft.ServerAddress(c.nodes[j].NodeID())
	if up {
		c.transport(i).Connect(peer, c.transport(j))
	} else {
		c.transport(i).Disconnect(peer)
	}
}

// isolate cuts (or restores) every link of node i, both ways.
func (c *memCluster) isolate(i int, cut bool) {
	for j := range c.nodes {
		if j != i {
			c.link(i, j, !cut)
			c.link(j, i, !cut)
		}
	}
}

// waitFor polls cond (Raft gives no event for what the tests wait on).
func (c *memCluster) waitFor(ctx context.Context, what string, cond func() bool) {
	c.t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			c.t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// TestAwaitGroupFetchOnFollower: a follower that has not applied a
// member's join yet waits for it rather than refusing the member as
// unknown (or not knowing the group), and answers as soon as it has
// applied it; one that stays behind past the wait names the leader
// (backend.BehindError); a member that really is fenced is refused at once, and a
// member's offset beyond the follower's log is waited for too. Switching
// the wait off (lacks returning "") makes the first fetch fail with
// ErrConsumerGroupNotFound.
func TestAwaitGroupFetchOnFollower(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newMemCluster(t, ctx, 3)
	leader, follower := c.nodes[0], c.nodes[2]
	if _, err := NewBackend(leader).createTopic(ctx, fsm.CreateTopic{Name: "orders", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewBackend(leader).appendCommand(ctx, fsm.Append{Topic: "orders", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, "a", "b")}}}); err != nil {
		t.Fatal(err)
	}
	c.waitFor(ctx, "follower applies the topic", func() bool { return follower.FSM().AppliedIndex() == leader.FSM().AppliedIndex() })
	// The leader registers its API address by a command of its own after
	// it is elected, which may commit after the topic.
	c.waitFor(ctx, "follower knows the leader's API address", func() bool { a, _ := follower.LeaderAPIAddress(); return a == "n1-api" })
	tp := group.TopicPartition{Topic: "orders", Partition: 0}

	// The follower misses the join: the leader commits it with n2.
	c.isolate(2, true)
	a, err := NewBackend(leader).joinGroup(ctx, fsm.GroupJoin{Group: "g", Member: "m1", Topics: []string{"orders"}, SessionTimeoutMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	check := backend.GroupFetchCheck{Group: "g", Member: "m1", Generation: a.Generation, Partition: tp, Offset: 0}

	// Still cut off past the wait: the follower sends the member to the leader.
	err = NewBackend(follower).AwaitGroupFetch(ctx, check, 20*time.Millisecond)
	var be *backend.BehindError
	if !errors.As(err, &be) || !errors.Is(err, backend.ErrBehind) {
		t.Fatalf("follower cut off from the leader: %v, want a backend.BehindError", err)
	}
	// It names the leader it knows; cut off past its heartbeat timeout
	// (a loaded machine) it stands for election and knows none, and then
	// names none rather than a stale one.
	if be.LeaderAddress != "n1-api" && (be.LeaderAddress != "" || follower.Status().LeaderID != "") {
		t.Errorf("BehindError names the leader at %q, want n1-api (or none once the follower has lost the leader: it knows %q)",
			be.LeaderAddress, follower.Status().LeaderID)
	}

	// Reconnected while it waits: it answers once it has applied the join.
	done := make(chan error, 1)
	go func() { done <- NewBackend(follower).AwaitGroupFetch(ctx, check, time.Hour) }()
	c.isolate(2, false)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("follower after catching up: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the follower never answered after catching up")
	}

	// A member that really is fenced (an older generation than the
	// follower holds) is refused at once: the hour's wait would outlast
	// the test's deadline.
	stale := check
	stale.Generation = a.Generation - 1
	if err := NewBackend(follower).AwaitGroupFetch(ctx, stale, time.Hour); !errors.Is(err, group.ErrStaleGeneration) {
		t.Fatalf("fenced member on the follower: %v, want ErrStaleGeneration", err)
	}
	unknown := check
	unknown.Member = "m-gone"
	if err := NewBackend(follower).AwaitGroupFetch(ctx, unknown, time.Hour); !errors.Is(err, group.ErrUnknownMember) {
		t.Fatalf("unknown member on the follower: %v, want ErrUnknownMember", err)
	}

	// The member's position beyond the follower's log (records it has not
	// applied yet) is waited for as well.
	c.isolate(2, true)
	if _, err := NewBackend(leader).appendCommand(ctx, fsm.Append{Topic: "orders", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, "c", "d")}}}); err != nil {
		t.Fatal(err)
	}
	ahead := check
	ahead.Offset = 4
	if err := NewBackend(follower).AwaitGroupFetch(ctx, ahead, 20*time.Millisecond); !errors.Is(err, backend.ErrBehind) {
		t.Fatalf("offset beyond the follower's log: %v, want backend.ErrBehind", err)
	}
	go func() { done <- NewBackend(follower).AwaitGroupFetch(ctx, ahead, time.Hour) }()
	c.isolate(2, false)
	if err := <-done; err != nil {
		t.Fatalf("offset after catching up: %v", err)
	}

	// The leader never waits: it holds every generation it gave out.
	ahead.Generation = a.Generation + 5
	if err := NewBackend(leader).AwaitGroupFetch(ctx, ahead, time.Hour); !errors.Is(err, group.ErrInvalidGroupRequest) {
		t.Fatalf("leader, generation ahead of the group: %v, want ErrInvalidGroupRequest", err)
	}
}
