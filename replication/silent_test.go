package replication

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/logd-dev/logd/backend"
)

// TestBalanceSkipsSilentNodes: a node that holds no replica and stopped
// answering (here drained, closed, then undrained) is not given replicas
// by a meta leader that has not heard from it, though its dead-node
// timeout (none here) has not passed: a move to it could never finish.
// The leadership of the meta group moves first, so the new leader has
// never heard from it in its term.
func TestBalanceSkipsSilentNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, nodes, describe := fourNodeGroups(ctx, t, 0)
	l, n4 := nodes[0], nodes[3]
	if _, err := l.DrainNode(ctx, "n4", false); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "n4 drained", func() bool { return !holds(l, "n4") }, describe)
	waitGroupsSettled(ctx, t, l, nodes, 4, describe)
	c.mu.Lock()
	c.closed[n4] = true
	c.mu.Unlock()
	c.close(n4)
	live := nodes[:3]
	if err := l.raft.LeadershipTransfer().Error(); err != nil {
		t.Fatalf("hand the meta group's leadership on: %v", err)
	}
	var nl *Node
	waitFor(ctx, t, "a new meta leader, ready", func() bool {
		for _, n := range live {
			if n != l && n.IsLeader() && n.Ready() {
				nl = n
				return true
			}
		}
		return false
	}, describe)
	// Undrained, n4 would be an empty node to balancing; it answers
	// nothing.
	var err error
	waitFor(ctx, t, "the drain of n4 ended", func() bool {
		_, err = nl.DrainNode(ctx, "n4", true)
		return err == nil || !errors.Is(err, backend.ErrNotLeader)
	}, describe)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if holds(nl, "n4") {
			t.Fatalf("balancing gave replicas to n4, which the meta leader has not heard from: %s", describe())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
