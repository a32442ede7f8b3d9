package replication

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/replication/fsm"
)

// Cluster membership. A node joins as a non-voter, catches up (through
// AppendEntries or a snapshot and segment catch-up), and is then promoted to
// voter, so a new, empty node never counts towards a quorum it cannot yet
// serve. Membership changes go one at a time on the leader.

// ErrUnknownNode means a membership call named a node that is not a member.
var ErrUnknownNode = errors.New("replication: unknown node")

// clusterState serializes membership changes on this node.
type clusterState struct {
	// changeMu is held for the whole of one membership change, catch-up
	// wait included.
	changeMu sync.Mutex
	// lastRegister is when registerSelf last proposed; housekeeping
	// goroutine only.
	lastRegister time.Time
}

// JoinRequest asks the leader to add a node.
type JoinRequest struct {
	ID          string
	RaftAddress string
	APIAddress  string
	// FeatureLevel is the highest feature level the node's build
	// understands (fsm.Level there); 0 when not known, which counts as
	// fsm.BaseLevel (features.go).
	FeatureLevel fsm.FeatureLevel
}

// Join adds a node to the cluster: it registers the node's API address,
// adds it as a non-voter, waits for caughtUp (which polls the new node until
// it has applied nearly all of the leader's log, or fails), and promotes it
// to voter. A node that is already a voter at that address is only
// re-registered. Only the leader can Join; one change runs at a time.
func (n *Node) Join(ctx context.Context, req JoinRequest, caughtUp func(context.Context) error) error {
	if req.ID == "" || req.RaftAddress == "" {
		return fmt.Errorf("%w: join needs a node id and a raft address", ErrInvalidArgument)
	}
	n.cluster.changeMu.Lock()
	defer n.cluster.changeMu.Unlock()
	if !n.IsLeader() {
		return ErrNotLeader
	}
	if req.APIAddress != "" {
		if addr, ok := n.fsm.NodeAddress(req.ID); !ok || addr != req.APIAddress || req.FeatureLevel != 0 && n.fsm.NodeFeatureLevel(req.ID) != req.FeatureLevel {
			if err := n.register(ctx, req.ID, req.APIAddress, req.FeatureLevel); err != nil {
				return err
			}
		}
	}
	cur, err := n.member(req.ID)
	if err != nil {
		return err
	}
	if cur != nil && cur.Suffrage == raft.Voter && string(cur.Address) == req.RaftAddress {
		return nil
	}
	timeout := n.cfg.ApplyTimeout
	if cur == nil || string(cur.Address) != req.RaftAddress {
		n.cfg.Logger.Info("adding node as non-voter", "node", req.ID, "raft", req.RaftAddress)
		if err := n.raft.AddNonvoter(raft.ServerID(req.ID), raft.ServerAddress(req.RaftAddress), 0, timeout).Error(); err != nil {
			return fmt.Errorf("add non-voter %s: %w", req.ID, mapRaftError(err))
		}
	}
	if err := caughtUp(ctx); err != nil {
		return fmt.Errorf("node %s did not catch up: %w", req.ID, err)
	}
	n.cfg.Logger.Info("promoting node to voter", "node", req.ID)
	if err := n.raft.AddVoter(raft.ServerID(req.ID), raft.ServerAddress(req.RaftAddress), 0, timeout).Error(); err != nil {
		return fmt.Errorf("promote %s: %w", req.ID, mapRaftError(err))
	}
	return nil
}

// RemoveNode removes a node from the cluster and forgets its address. A
// removed node is no longer part of any quorum and never acknowledges a
// write again (its votes and entries are ignored); to bring its machine
// back, wipe its data and join it under a new id.
func (n *Node) RemoveNode(ctx context.Context, id string) error {
	n.cluster.changeMu.Lock()
	defer n.cluster.changeMu.Unlock()
	if !n.IsLeader() {
		return ErrNotLeader
	}
	cur, err := n.member(id)
	if err != nil {
		return err
	}
	if cur == nil {
		return fmt.Errorf("%w: %q", ErrUnknownNode, id)
	}
	// Forget the address first: removing the leader itself ends its
	// ability to propose.
	data, err := fsm.EncodeJSON(fsm.CmdNodeDeregister, n.cfg.Now().UnixNano(), fsm.NodeDeregister{ID: id})
	if err != nil {
		return err
	}
	if _, err := n.propose(ctx, data); err != nil {
		return err
	}
	n.cfg.Logger.Info("removing node", "node", id)
	if err := n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.ApplyTimeout).Error(); err != nil {
		return fmt.Errorf("remove %s: %w", id, mapRaftError(err))
	}
	return nil
}

// TransferLeadership hands leadership to the named voter, or to the most
// up-to-date one when id is empty, and waits for the handover.
func (n *Node) TransferLeadership(ctx context.Context, id string) error {
	n.cluster.changeMu.Lock()
	defer n.cluster.changeMu.Unlock()
	if !n.IsLeader() {
		return ErrNotLeader
	}
	var f raft.Future
	if id == "" {
		f = n.raft.LeadershipTransfer()
	} else {
		cur, err := n.member(id)
		if err != nil {
			return err
		}
		if cur == nil || cur.Suffrage != raft.Voter {
			return fmt.Errorf("%w: %q is not a voter", ErrUnknownNode, id)
		}
		if id == n.cfg.NodeID {
			return nil
		}
		f = n.raft.LeadershipTransferToServer(cur.ID, cur.Address)
	}
	if err := f.Error(); err != nil {
		return fmt.Errorf("transfer leadership: %w", mapRaftError(err))
	}
	return nil
}

// member returns a server of the current configuration, or nil.
func (n *Node) member(id string) (*raft.Server, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, mapRaftError(err)
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			return &s, nil
		}
	}
	return nil, nil
}

// register proposes a node's API address and feature level.
func (n *Node) register(ctx context.Context, id, addr string, level fsm.FeatureLevel) error {
	data, err := fsm.EncodeJSON(fsm.CmdNodeRegister, n.cfg.Now().UnixNano(), fsm.NodeRegister{ID: id, APIAddress: addr, FeatureLevel: level})
	if err != nil {
		return err
	}
	_, err = n.propose(ctx, data)
	return err
}

// registerSelf registers this node's own API address and feature level
// when it leads and the registry lacks them (a bootstrapped node, a new
// --advertise, or a new build). Called by housekeeping; at most one attempt
// per second.
func (n *Node) registerSelf() {
	if n.cfg.APIAdvertise == "" || !n.ready.Load() || !n.IsLeader() {
		return
	}
	if addr, ok := n.fsm.NodeAddress(n.cfg.NodeID); ok && addr == n.cfg.APIAdvertise && n.fsm.NodeFeatureLevel(n.cfg.NodeID) == fsm.Level {
		return
	}
	if time.Since(n.cluster.lastRegister) < time.Second {
		return
	}
	n.cluster.lastRegister = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := n.register(ctx, n.cfg.NodeID, n.cfg.APIAdvertise, fsm.Level); err != nil {
		n.cfg.Logger.Warn("register own API address", "err", err)
	}
}

// LeaderAPIAddress returns the leader's registered client API address and
// id; empty when no leader is known or it is not registered.
func (n *Node) LeaderAPIAddress() (addr, id string) {
	_, lid := n.raft.LeaderWithID()
	if lid == "" {
		return "", ""
	}
	a, _ := n.fsm.NodeAddress(string(lid))
	return a, string(lid)
}

// APIAddress is this node's advertised client API address.
func (n *Node) APIAddress() string { return n.cfg.APIAdvertise }

// NodeID is this node's Raft server id.
func (n *Node) NodeID() string { return n.cfg.NodeID }

// maxNonCommandGap bounds how many entries appliedThrough inspects.
const maxNonCommandGap = 64

// appliedThrough reports whether the FSM's state is that of index: it
// applied index, or every entry after its applied index up to index is a
// Raft-internal entry (no-op, configuration) that the FSM never sees. Without
// this a follower whose newest entries are a new leader's no-op would never
// count as caught up.
func (n *Node) appliedThrough(index uint64) bool {
	applied := n.fsm.AppliedIndex()
	if applied >= index {
		return true
	}
	if index-applied > maxNonCommandGap {
		return false
	}
	var l raft.Log
	for i := applied + 1; i <= index; i++ {
		if err := n.stores.logs.GetLog(i, &l); err != nil || l.Type == raft.LogCommand {
			return false
		}
	}
	return true
}

// effectiveApplied is the index whose state the FSM holds: commit when it
// has applied every command up to it, else the FSM's applied index.
func (n *Node) effectiveApplied(commit uint64) uint64 {
	if commit > 0 && n.appliedThrough(commit) {
		return max(commit, n.fsm.AppliedIndex())
	}
	return n.fsm.AppliedIndex()
}
