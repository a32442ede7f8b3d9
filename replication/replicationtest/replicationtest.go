package replicationtest

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/peer"
	"github.com/logd-dev/logd/replication"
)

// Options varies a test node. The zero value is a bootstrapped node
// named "n1" on the in-memory transport, on the wall clock.
type Options struct {
	// NodeID is the node's Raft server id; default "n1".
	NodeID string
	// Dir holds the partition logs. Start defaults it to the test's
	// TempDir; Open requires it.
	Dir string
	// Now is the node's clock: it stamps every command, so leases,
	// backoff, session expiry and retention follow it. Default time.Now.
	Now func() time.Time
	// FS is the partition logs' file system; default the operating
	// system's. A log/logtest.FaultFS fails or slows the node's writes on
	// demand: the node then stops, and Fatal hears why.
	FS log.FS
	// TCP runs Raft over a real port on 127.0.0.1 (an ephemeral one, see
	// Node.Status) and keeps its log, stable store and snapshots in Dir,
	// for tests of the Raft port itself. Default: in memory.
	TCP bool
	// PeerTLS puts the Raft port under the cluster's mutual TLS; it
	// implies TCP.
	PeerTLS *peer.TLS
	// NoBootstrap leaves the node unbootstrapped: it knows no leader and
	// never leads, and Start returns without waiting for it to.
	NoBootstrap bool
	// APIAdvertise is the client API address the node registers; Start
	// then waits until the node reports itself as the leader at it.
	// Empty: none is registered.
	APIAdvertise string
	// FeatureLevel is the level the node runs at; zero is its build's.
	FeatureLevel backend.FeatureLevel
	// Quota bounds the cluster's topics and partitions; zero: none.
	Quota backend.TopicQuota
	// RaftLogLevel is hashicorp/raft's own log level; default "error"
	// (warnings about a leader without peers are only noise).
	RaftLogLevel string
	// DataGroupsPerNode runs that many data groups beside the meta group
	// (replication.Config.DataGroupsPerNode); it implies TCP, and Open
	// returns once every group leads.
	DataGroupsPerNode int
	// Fatal hears the state machine's failures, at which the node stops
	// as a production node would exit. Start defaults it to failing the
	// test; Open requires it, since the process would otherwise exit.
	Fatal func(error)
}

// Raft timeouts of a test node, raft's smallest: a single voter elects
// itself after one heartbeat timeout, and with no peer to miss it cannot
// lose its leadership by a short one.
const (
	heartbeatTimeout   = 5 * time.Millisecond
	electionTimeout    = 5 * time.Millisecond
	leaderLeaseTimeout = 5 * time.Millisecond
)

// StartTimeout bounds how long Open waits for the node to lead.
const StartTimeout = 10 * time.Second

// Node is a test node and the backend over it.
type Node struct {
	*replication.Node
	// Backend is the node's replication.Backend, the front ends' view.
	Backend *replication.Backend
}

// Start opens a node for the test and closes it in the test's Cleanup; it
// fails the test if the node cannot start or does not lead within
// StartTimeout (unless NoBootstrap), and if closing it fails.
func Start(tb testing.TB, opts Options) *Node {
	tb.Helper()
	if opts.Dir == "" {
		opts.Dir = tb.TempDir()
	}
	if opts.Fatal == nil {
		opts.Fatal = func(err error) { tb.Errorf("replicationtest: node stopped: %v", err) }
	}
	n, err := Open(opts)
	if err != nil {
		tb.Fatalf("replicationtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := n.Close(); err != nil {
			tb.Errorf("replicationtest: close node: %v", err)
		}
	})
	return n
}

// Open opens a node and, unless NoBootstrap, returns once it leads, has
// applied its log and (with APIAdvertise) has registered its address. The
// caller must Close it; tests use Start instead.
func Open(opts Options) (*Node, error) {
	if opts.Dir == "" {
		return nil, errors.New("open node: no Dir")
	}
	if opts.Fatal == nil {
		return nil, errors.New("open node: no Fatal")
	}
	if opts.NodeID == "" {
		opts.NodeID = "n1"
	}
	if opts.RaftLogLevel == "" {
		opts.RaftLogLevel = "error"
	}
	cfg := replication.Config{
		NodeID:             opts.NodeID,
		DataDir:            opts.Dir,
		InMemory:           true,
		RaftBind:           "mem:" + opts.NodeID,
		Bootstrap:          !opts.NoBootstrap,
		Logger:             slog.New(slog.DiscardHandler),
		RaftLogLevel:       opts.RaftLogLevel,
		HeartbeatTimeout:   heartbeatTimeout,
		ElectionTimeout:    electionTimeout,
		LeaderLeaseTimeout: leaderLeaseTimeout,
		Now:                opts.Now,
		FeatureLevel:       opts.FeatureLevel,
		Quota:              opts.Quota,
		Log:                log.Options{FS: opts.FS},
		// Retention runs when the test calls Clean, not behind its back.
		CleanerInterval: 24 * time.Hour,
		APIAdvertise:    opts.APIAdvertise,
		PeerTLS:         opts.PeerTLS,
		Fatal:           opts.Fatal,
		// Data groups are placed and elected at the leader's pace.
		DataGroupsPerNode: opts.DataGroupsPerNode,
	}
	if opts.TCP || opts.PeerTLS != nil || opts.DataGroupsPerNode > 0 {
		cfg.InMemory, cfg.RaftBind = false, "127.0.0.1:0"
	}
	node, err := replication.Open(cfg)
	if err != nil {
		return nil, fmt.Errorf("open node: %w", err)
	}
	n := &Node{Node: node, Backend: replication.NewBackend(node)}
	if opts.NoBootstrap {
		return n, nil
	}
	if err := n.waitServing(opts.APIAdvertise, opts.DataGroupsPerNode); err != nil {
		node.Close()
		return nil, err
	}
	return n, nil
}

// waitServing waits until the node leads, has applied its log and, if it
// advertises an API address, reports itself as the leader at it, and
// leads groups data groups.
func (n *Node) waitServing(api string, groups int) error {
	deadline := time.Now().Add(StartTimeout)
	for {
		addr, _ := n.LeaderAPIAddress()
		if n.IsLeader() && n.Ready() && addr == api && n.leadsDataGroups(groups) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node did not lead and serve within %v", StartTimeout)
		}
		// Raft announces no event a caller could wait on for this.
		time.Sleep(2 * time.Millisecond)
	}
}

// leadsDataGroups reports whether the node runs and leads want data
// groups.
func (n *Node) leadsDataGroups(want int) bool {
	rs := n.DataGroupReplicas()
	if len(rs) != want {
		return false
	}
	for _, r := range rs {
		if r.Raft.State() != raft.Leader {
			return false
		}
	}
	return true
}
