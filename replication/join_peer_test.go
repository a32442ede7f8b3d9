package replication

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/logd-dev/logd/backend"
)

// TestJoinPeerAddress: a node with a peer listener (Config.PeerAdvertise)
// sends its peer and Kafka addresses with its join; the leader asks it at
// the peer address only (its API address may not even answer the
// leader), registers both, and other nodes then call it there
// (LeaderCallAddress). A bootstrapped leader registers its own. A peer
// address that is malformed or another member's is refused, and a
// registered one moves only once it no longer answers as the node.
func TestJoinPeerAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newJoinCluster(t)
	c.configure = func(id string, cfg *Config) {
		cfg.PeerAdvertise = id + ".peer.test:7072"
		cfg.KafkaAdvertise = id + ".kafka.test:9092"
	}
	l := c.open(ctx, "n1", true)
	waitCond(t, ctx, "n1 registers its peer and Kafka addresses", func() bool {
		reg, _ := l.fsm.Node("n1")
		return reg.PeerAddress == "n1.peer.test:7072" && reg.KafkaAddress == "n1.kafka.test:9092"
	})
	j := c.open(ctx, "n2", false)
	// The leader reaches n2 at its peer address; its API address is
	// silent to the leader.
	c.mu.Lock()
	c.byAPI[j.cfg.PeerAdvertise] = j
	c.mu.Unlock()
	c.setSilent(j, true)

	var req backend.JoinRequest
	if _, err := j.JoinCluster(ctx, "n1.api.test:7070", func(_ context.Context, _ string, r backend.JoinRequest) (string, error) {
		req = r
		return "n1", nil
	}); err != nil {
		t.Fatal(err)
	}
	if req.PeerAddress != "n2.peer.test:7072" || req.KafkaAddress != "n2.kafka.test:9092" {
		t.Fatalf("join request %+v; want n2's peer and Kafka addresses", req)
	}
	before := membership(t, l)
	for _, tc := range []struct {
		name string
		edit func(*backend.JoinRequest)
		want error
	}{
		{name: "malformed peer address", edit: func(r *backend.JoinRequest) { r.PeerAddress = "n2.peer.test" }, want: backend.ErrInvalidArgument},
		{name: "peer address on any interface", edit: func(r *backend.JoinRequest) { r.PeerAddress = "0.0.0.0:7072" }, want: backend.ErrInvalidArgument},
		{name: "malformed Kafka address", edit: func(r *backend.JoinRequest) { r.KafkaAddress = "n2.kafka.test:x" }, want: backend.ErrInvalidArgument},
		{name: "peer address silent", edit: func(r *backend.JoinRequest) { r.PeerAddress = "nobody.peer.test:7072" }, want: backend.ErrNodeUnreachable},
		{name: "peer address of a member", edit: func(r *backend.JoinRequest) { r.PeerAddress = "n1.peer.test:7072" }, want: backend.ErrNodeConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := req
			tc.edit(&r)
			if err := l.Join(ctx, r, c.probe); !errors.Is(err, tc.want) {
				t.Fatalf("Join(%+v) = %v, want %v", r, err, tc.want)
			}
			if after := membership(t, l); after != before {
				t.Fatalf("membership changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}

	if err := l.Join(ctx, req, c.probe); err != nil {
		t.Fatalf("join n2 at its peer address: %v", err)
	}
	if m, _ := l.member("n2"); m == nil || m.Suffrage != raft.Voter {
		t.Fatalf("n2 after its join: %+v, want a voter", m)
	}
	for _, n := range []*Node{l, j} {
		waitCond(t, ctx, n.cfg.NodeID+" knows n2's addresses", func() bool {
			reg, _ := n.fsm.Node("n2")
			return reg.APIAddress == "n2.api.test:7070" && reg.PeerAddress == "n2.peer.test:7072" && reg.KafkaAddress == "n2.kafka.test:9092"
		})
	}
	if addr, id := j.LeaderCallAddress(); addr != "n1.peer.test:7072" || id != "n1" {
		t.Errorf("n2 calls the leader at %q (%s), want n1's peer address", addr, id)
	}
	if addr, _ := j.LeaderAPIAddress(); addr != "n1.api.test:7070" {
		t.Errorf("n2 tells clients the leader is at %q, want n1's API address", addr)
	}

	// A new peer address moves the registration only once the old one
	// stops answering as n2.
	moved := req
	moved.PeerAddress = "n2-moved.peer.test:7072"
	c.mu.Lock()
	c.byAPI[moved.PeerAddress] = j
	c.mu.Unlock()
	if err := l.Join(ctx, moved, c.probe); !errors.Is(err, backend.ErrNodeConflict) {
		t.Errorf("n2 at another peer address while the old one answers: %v, want backend.ErrNodeConflict", err)
	}
	c.mu.Lock()
	c.silent[req.PeerAddress] = true
	c.mu.Unlock()
	if err := l.Join(ctx, moved, c.probe); err != nil {
		t.Errorf("n2 at another peer address once the old one is silent: %v", err)
	}
	if reg, _ := l.fsm.Node("n2"); reg.PeerAddress != moved.PeerAddress {
		t.Errorf("n2's peer address %q, want %q", reg.PeerAddress, moved.PeerAddress)
	}
}
