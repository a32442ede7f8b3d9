package replication

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/internal/fsmtest"
	"github.com/logd-dev/logd/replication/transport"
)

// askSecretOf is the AskSecret of a joining node whose Join call reaches
// leader l (the front end answers it with ClusterSecret).
func askSecretOf(l *Node) AskSecret {
	return func(ctx context.Context, member string, req backend.JoinRequest) (SecretAnswer, error) {
		if !req.SecretOnly {
			return SecretAnswer{}, errors.New("not a secret-only call")
		}
		s, required := l.ClusterSecret()
		return SecretAnswer{Secret: s, Required: required, LeaderID: l.NodeID()}, nil
	}
}

// TestClusterSecretPlaintext: a node that bootstraps makes the cluster
// secret (a 0600 file of its data dir); a joining node asks for it and
// joins; and on the plaintext Raft port of the loopback cluster a local
// process without it can neither depose the leader with a RequestVote
// in a member's name, in Raft's own framing or in a session, nor have a
// follower accept an AppendEntries of a fake leader.
func TestClusterSecretPlaintext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newJoinCluster(t)
	// Nodes of this test make and fetch the secret themselves.
	c.configure = func(id string, cfg *Config) { cfg.ClusterSecret = nil }
	l := c.open(ctx, "n1", true)
	secret := l.clusterSecretKey()
	if len(secret) != secretLen {
		t.Fatalf("the bootstrapped node's secret has %d bytes, want %d", len(secret), secretLen)
	}
	fi, err := os.Stat(filepath.Join(l.cfg.DataDir, secretFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file: %v, %v; want mode 0600", fi, err)
	}
	c.configure = func(id string, cfg *Config) { cfg.ClusterSecret, cfg.AskSecret = nil, askSecretOf(l) }
	n2 := c.open(ctx, "n2", false)
	if _, err := n2.JoinCluster(ctx, "n1.api.test:7070", func(ctx context.Context, _ string, req backend.JoinRequest) (string, error) {
		return "n1", l.Join(ctx, req, c.probe)
	}); err != nil {
		t.Fatalf("join n2: %v", err)
	}
	if !bytes.Equal(n2.clusterSecretKey(), secret) {
		t.Fatal("the joined node holds another secret")
	}
	if _, err := NewBackend(l).createTopic(ctx, fsm.CreateTopic{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	waitCond(t, ctx, "n2 applies the topic", func() bool { _, err := n2.fsm.Partition("t", 0); return err == nil })

	leaderAddr := string(l.stores.transport.LocalAddr())
	t.Run("a spoofed vote in raft's framing", func(t *testing.T) {
		before, term := l.RaftConnStats().RefusedSecret, l.raft.CurrentTerm()
		if err := spoofVote(t, nil, leaderAddr, n2, term+10); err == nil {
			t.Error("a RequestVote in n2's name was answered")
		}
		if got := l.raft.CurrentTerm(); got >= term+10 || !l.IsLeader() {
			t.Errorf("after a spoofed vote n1 is in term %d (was %d), leader %v", got, term, l.IsLeader())
		}
		waitCond(t, ctx, "the refusal counted", func() bool { return l.RaftConnStats().RefusedSecret > before })
	})
	for _, tc := range []struct {
		name   string
		secret []byte
	}{{name: "without a secret"}, {name: "with another secret", secret: bytes.Repeat([]byte{1}, secretLen)}} {
		t.Run("a spoofed vote in a session "+tc.name, func(t *testing.T) {
			term := l.raft.CurrentTerm()
			tr := strangerTransport(t, "n2", tc.secret)
			req := &raft.RequestVoteRequest{
				RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n2"), Addr: tr.EncodePeer("n2", n2.stores.transport.LocalAddr())},
				Term:      term + 10, LastLogIndex: l.raft.LastIndex() + 1000, LastLogTerm: term + 10, LeadershipTransfer: true,
			}
			var resp raft.RequestVoteResponse
			if err := tr.RequestVote("n1", raft.ServerAddress(leaderAddr), req, &resp); err == nil {
				t.Error("a RequestVote in n2's name was answered")
			}
			if got := l.raft.CurrentTerm(); got >= term+10 || !l.IsLeader() {
				t.Errorf("after a spoofed vote n1 is in term %d (was %d), leader %v", got, term, l.IsLeader())
			}
		})
	}
	t.Run("a fake leader's append to a follower", func(t *testing.T) {
		term := n2.raft.CurrentTerm()
		tr := strangerTransport(t, "n9", nil)
		req := &raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n9"), Addr: tr.EncodePeer("n9", tr.LocalAddr())},
			Term:      term + 10, PrevLogEntry: n2.raft.LastIndex(), PrevLogTerm: term,
		}
		var resp raft.AppendEntriesResponse
		if err := tr.AppendEntries("n2", n2.stores.transport.LocalAddr(), req, &resp); err == nil {
			t.Errorf("a fake leader's AppendEntries was answered: %+v", resp)
		}
		if got := n2.raft.CurrentTerm(); got >= term+10 {
			t.Errorf("after a fake leader's append n2 is in term %d (was %d)", got, term)
		}
	})
	t.Run("a restart keeps the secret", func(t *testing.T) {
		n2 = c.restart(n2, nil)
		if !bytes.Equal(n2.clusterSecretKey(), secret) {
			t.Fatal("the restarted node holds another secret")
		}
		if _, err := NewBackend(l).appendCommand(ctx, fsm.Append{Topic: "t", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, "after restart")}}}); err != nil {
			t.Fatal(err)
		}
		waitValues(t, ctx, n2, "t", "after restart")
	})
}

// strangerTransport is a Raft transport of a local process on the
// plaintext loopback that names itself id in its sessions and proves
// secret (nil: none), closed at the test's end.
func strangerTransport(t *testing.T, id string, secret []byte) *raft.NetworkTransport {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := transport.NewPort(ln, nil, nil, id, 16, fsmtest.Logger())
	port.SetSecret(secret, true)
	port.Start()
	tr := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: port.Group(0), MaxPool: 1, Timeout: 2 * time.Second, Logger: hclog.NewNullLogger()})
	t.Cleanup(func() { tr.Close(); tr.CloseStreams(); port.Close() })
	return tr
}

// TestClusterSecretFile: a secret file that holds no secret, and a
// secret given that differs from the data dir's, stop the node from
// opening.
func TestClusterSecretFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, secretFile), []byte("not hex\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{NodeID: "n1", DataDir: dir, RaftBind: "127.0.0.1:0", Bootstrap: true, Logger: fsmtest.Logger(), RaftLogLevel: "error"}
	if n, err := Open(cfg); !errors.Is(err, ErrClusterSecret) {
		if n != nil {
			n.Close()
		}
		t.Fatalf("open with a broken secret file: %v, want ErrClusterSecret", err)
	}
	if err := writeSecret(dir, bytes.Repeat([]byte{2}, secretLen), true); err != nil {
		t.Fatal(err)
	}
	cfg.ClusterSecret = bytes.Repeat([]byte{3}, secretLen)
	if n, err := Open(cfg); !errors.Is(err, ErrClusterSecret) {
		if n != nil {
			n.Close()
		}
		t.Fatalf("open with another secret than the data dir's: %v, want ErrClusterSecret", err)
	}
	got, _, err := readSecret(dir)
	if err != nil || !bytes.Equal(got, bytes.Repeat([]byte{2}, secretLen)) {
		t.Fatalf("the data dir's secret after refused opens: %x, %v", got, err)
	}
}

// TestClusterSecretHandover: a cluster of three nodes of an earlier build
// holds no secret; upgraded one node at a time, once every member runs a
// build at fsm.SessionLevel the leader makes one, the followers ask it
// for it, and once every member registered its fingerprint each requires
// it. The cluster takes writes throughout, and a spoofed vote is refused
// at the end.
func TestClusterSecretHandover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newJoinCluster(t)
	c.configure = func(id string, cfg *Config) {
		cfg.ClusterSecret, cfg.FeatureLevel = nil, backend.FeatureLevel(fsm.SessionLevel-1)
	}
	l := c.open(ctx, "n1", true)
	nodes := []*Node{l, c.open(ctx, "n2", false), c.open(ctx, "n3", false)}
	for _, n := range nodes[1:] {
		if err := l.Join(ctx, joinRequest(n), c.probe); err != nil {
			t.Fatalf("join %s: %v", n.NodeID(), err)
		}
	}
	for _, n := range nodes {
		if s, _ := n.ClusterSecret(); s != nil {
			t.Fatalf("%s of an earlier build holds a secret", n.NodeID())
		}
	}
	if _, err := NewBackend(l).createTopic(ctx, fsm.CreateTopic{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	var values []string
	write := func(v string) {
		t.Helper()
		for _, n := range nodes {
			if !n.IsLeader() {
				continue
			}
			if _, err := NewBackend(n).appendCommand(ctx, fsm.Append{Topic: "t", Batches: []fsm.PartitionBatch{{Partition: 0, Batch: mustBatch(t, v)}}}); err != nil {
				t.Fatalf("append %s: %v", v, err)
			}
			values = append(values, v)
			return
		}
		t.Fatal("no leader to write to")
	}
	write("before")
	// The secret-only Join call, answered by the node at the address
	// asked, as the front end answers it.
	ask := func(ctx context.Context, member string, req backend.JoinRequest) (SecretAnswer, error) {
		c.mu.Lock()
		n := c.byAPI[member]
		c.mu.Unlock()
		if n == nil || !req.SecretOnly {
			return SecretAnswer{}, errors.New("no such member")
		}
		s, required := n.ClusterSecret()
		return SecretAnswer{Secret: s, Required: required, LeaderID: n.NodeID()}, nil
	}
	// A follower's registration: the Join call, register_only, to the
	// leader at the address asked.
	register := func(ctx context.Context, member string, req backend.JoinRequest) (string, error) {
		c.mu.Lock()
		n := c.byAPI[member]
		c.mu.Unlock()
		if n == nil {
			return "", errors.New("no such member")
		}
		return n.NodeID(), n.Join(ctx, req, c.probe)
	}
	for i := range nodes {
		nodes[i] = c.restart(nodes[i], func(cfg *Config) {
			cfg.FeatureLevel, cfg.AskSecret, cfg.Register = backend.FeatureLevel(fsm.Level), ask, register
		})
		waitCond(t, ctx, "a leader after restarting "+nodes[i].NodeID(), func() bool {
			for _, n := range nodes {
				if n.IsLeader() && n.Ready() {
					return true
				}
			}
			return false
		})
		write("after " + nodes[i].NodeID())
	}
	waitCond(t, ctx, "every node requires the same secret", func() bool {
		first, _ := nodes[0].ClusterSecret()
		for _, n := range nodes {
			s, required := n.ClusterSecret()
			if !required || s == nil || !bytes.Equal(s, first) {
				return false
			}
		}
		return true
	})
	write("secret required")
	for _, n := range nodes {
		waitValues(t, ctx, n, "t", values...)
		if _, required, err := readSecret(n.cfg.DataDir); err != nil || !required {
			t.Errorf("%s's secret file: required %v, %v", n.NodeID(), required, err)
		}
	}
	var leader, follower *Node
	for _, n := range nodes {
		if n.IsLeader() {
			leader = n
		} else {
			follower = n
		}
	}
	term := leader.raft.CurrentTerm()
	if err := spoofVote(t, nil, string(leader.stores.transport.LocalAddr()), follower, term+10); err == nil {
		t.Error("a spoofed RequestVote was answered once the secret is required")
	}
	if got := leader.raft.CurrentTerm(); got >= term+10 {
		t.Errorf("after a spoofed vote the leader is in term %d (was %d)", got, term)
	}
}
