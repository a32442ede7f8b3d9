package replication

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
)

// Cluster membership. A node joins as a non-voter, catches up (through
// AppendEntries or a snapshot and segment catch-up), and is then promoted to
// voter, so a new, empty node never counts towards a quorum it cannot yet
// serve. Before anything changes, the leader checks the joining node (join.go):
// well-formed addresses, its client API answering with the id it claims, its
// Raft address accepting a connection; and it promotes only a node that
// reports having applied nearly all of the leader's log, as a follower of
// this leader, when the voters that would then answer are a majority of the
// new configuration. One membership change (a Join or a RemoveNode) runs at
// a time; another is refused with backend.ErrMembershipChange, not queued.

// clusterState serializes membership changes on this node.
type clusterState struct {
	// mu guards change.
	mu sync.Mutex
	// change is the Join or RemoveNode in progress; nil when none.
	change *memberChange
	// transferMu is held for the whole of one leadership transfer.
	transferMu sync.Mutex
}

// memberChange is one Join or RemoveNode in progress.
type memberChange struct {
	join bool
	id   string
	// cancel ends the change's context: RemoveNode of the node a join
	// waits for ends that join.
	cancel context.CancelCauseFunc
	// done is closed once the change has ended and left the slot.
	done chan struct{}
}

func (c *memberChange) String() string {
	if c.join {
		return "join of " + c.id
	}
	return "removal of " + c.id
}

// errRemovedWhileJoining ends a join whose node RemoveNode takes out.
var errRemovedWhileJoining = errors.New("removed while joining")

// beginChange takes the membership change slot for a join or a removal of
// id, or fails with backend.ErrMembershipChange when another change holds it. A
// removal of the node a join is waiting for ends that join first, so a
// node that never catches up can always be removed. The returned context
// ends with ctx or when such a removal ends the change; end releases the
// slot.
func (n *Node) beginChange(ctx context.Context, join bool, id string) (context.Context, func(), error) {
	for {
		n.cluster.mu.Lock()
		cur := n.cluster.change
		if cur == nil {
			cctx, cancel := context.WithCancelCause(ctx)
			c := &memberChange{join: join, id: id, cancel: cancel, done: make(chan struct{})}
			n.cluster.change = c
			n.cluster.mu.Unlock()
			return cctx, func() {
				cancel(nil)
				n.cluster.mu.Lock()
				n.cluster.change = nil
				n.cluster.mu.Unlock()
				close(c.done)
			}, nil
		}
		n.cluster.mu.Unlock()
		if join || !cur.join || cur.id != id {
			return nil, nil, fmt.Errorf("%w: %s", backend.ErrMembershipChange, cur)
		}
		cur.cancel(errRemovedWhileJoining)
		select {
		case <-cur.done:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// Join adds a node to the cluster, on the leader, and returns once it is a
// voter. It checks the request (backend.ErrInvalidArgument) and the node, through
// probe (backend.ErrNodeUnreachable), before it changes anything; registers the
// node's addresses and feature level; adds it as a non-voter; waits until
// probe shows it has applied all but joinMaxLag of the leader's log as a
// follower of this leader; and promotes it to voter when the voters that
// answer, the new one included, are a majority of the new configuration
// (backend.ErrNoQuorum otherwise). A node that is a voter at the same addresses is
// only re-registered when its feature level, peer or Kafka address
// changed, and a non-voter at the same addresses resumes where an earlier
// attempt stopped. The leader asks the node at its peer address when it
// gives one, else at its API address (backend.JoinRequest.callAddress). The same
// id at another Raft address, or an address of another member, is
// backend.ErrNodeConflict; a registered API or peer address moves only when its
// old one no longer answers as the node. Another change in progress is
// backend.ErrMembershipChange. A request with RegisterOnly changes the registry
// only, under the same checks, and only of a member.
func (n *Node) Join(ctx context.Context, req backend.JoinRequest, probe backend.NodeProbe) error {
	if err := validateJoin(req); err != nil {
		return err
	}
	if probe == nil {
		return fmt.Errorf("%w: join needs a way to ask the node", backend.ErrInvalidArgument)
	}
	if err := n.checkJoinCaller(req); err != nil {
		return err
	}
	if !n.IsLeader() {
		return backend.ErrNotLeader
	}
	plan, err := n.planJoin(req)
	if err != nil || plan.done {
		return err
	}
	if err := plan.registerOnly(req); err != nil || req.RegisterOnly && !plan.register {
		return err
	}
	// Checked before taking the slot: a flood of bogus joins costs a probe
	// each and holds up no real change.
	if err := n.checkJoiner(ctx, req, probe); err != nil {
		return err
	}
	cctx, end, err := n.beginChange(ctx, true, req.ID)
	if err != nil {
		return err
	}
	defer end()
	if err := n.join(cctx, req, probe); err != nil {
		if cause := context.Cause(cctx); cause == errRemovedWhileJoining {
			return fmt.Errorf("join %s: %w: %v", req.ID, backend.ErrUnknownNode, cause)
		}
		return err
	}
	return nil
}

// join is Join once the slot is taken.
func (n *Node) join(ctx context.Context, req backend.JoinRequest, probe backend.NodeProbe) error {
	if !n.IsLeader() {
		return backend.ErrNotLeader
	}
	// Things may have moved while the joiner was checked.
	plan, err := n.planJoin(req)
	if err != nil || plan.done {
		return err
	}
	if err := plan.registerOnly(req); err != nil {
		return err
	}
	for _, old := range plan.movedFrom {
		// A member's API or peer address moves only when the old one no
		// longer answers as that node (a restart on another port), so
		// nobody can take over a live member's registration.
		pctx, cancel := context.WithTimeout(ctx, joinProbeTimeout)
		rep, err := probe(pctx, old)
		cancel()
		if err == nil && rep.ID == req.ID {
			return fmt.Errorf("%w: node %s answers at its registered address %s, not moving it (API address %s, peer address %q)",
				backend.ErrNodeConflict, req.ID, old, req.APIAddress, req.PeerAddress)
		}
	}
	if plan.register {
		reg := fsm.NodeRegister{ID: req.ID, APIAddress: req.APIAddress, FeatureLevel: fsm.FeatureLevel(req.FeatureLevel),
			PeerAddress: req.PeerAddress, KafkaAddress: req.KafkaAddress, SecretFingerprint: req.SecretFingerprint}
		if err := n.register(ctx, reg); err != nil {
			return err
		}
	}
	if req.RegisterOnly {
		return nil
	}
	timeout := n.cfg.ApplyTimeout
	switch {
	case plan.member == nil:
		n.cfg.Logger.Info("adding node as non-voter", "node", req.ID, "raft", req.RaftAddress, "api", req.APIAddress, "peer", req.PeerAddress)
		if err := n.raft.AddNonvoter(raft.ServerID(req.ID), raft.ServerAddress(req.RaftAddress), 0, timeout).Error(); err != nil {
			return fmt.Errorf("add non-voter %s: %w", req.ID, mapRaftError(err))
		}
	case plan.member.Suffrage == raft.Voter:
		return nil // re-registered only
	}
	if err := n.waitCaughtUp(ctx, req, probe); err != nil {
		return fmt.Errorf("node %s stays a non-voter: %w", req.ID, err)
	}
	if err := n.checkQuorum(ctx, req.ID, probe); err != nil {
		return fmt.Errorf("node %s stays a non-voter: %w", req.ID, err)
	}
	n.cfg.Logger.Info("promoting node to voter", "node", req.ID)
	if err := n.raft.AddVoter(raft.ServerID(req.ID), raft.ServerAddress(req.RaftAddress), 0, timeout).Error(); err != nil {
		return fmt.Errorf("promote %s: %w", req.ID, mapRaftError(err))
	}
	return nil
}

// joinPlan is what a join still has to do.
type joinPlan struct {
	// member is the node's server in the configuration, nil when none.
	member *raft.Server
	// register: its addresses or feature level must be (re)registered.
	register bool
	// movedFrom are the member's registered API and peer addresses that
	// the request moves elsewhere.
	movedFrom []string
	// done: it is a voter at these addresses; nothing to do.
	done bool
}

// registerOnly refuses a request with RegisterOnly from a node that is
// not a member: registering it would not make it one, and adding it is
// a join's business.
func (p joinPlan) registerOnly(req backend.JoinRequest) error {
	if req.RegisterOnly && p.member == nil {
		return fmt.Errorf("%w: %s asks to be registered but is not a member (join it first)", backend.ErrUnknownNode, req.ID)
	}
	return nil
}

// planJoin compares a join request with the configuration and the node
// registry: backend.ErrNodeConflict when the id is a member at another Raft
// address, or an address is another member's.
func (n *Node) planJoin(req backend.JoinRequest) (joinPlan, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return joinPlan{}, mapRaftError(err)
	}
	var p joinPlan
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == req.ID {
			p.member = &s
			continue
		}
		if string(s.Address) == req.RaftAddress {
			return p, fmt.Errorf("%w: raft address %s is node %s's", backend.ErrNodeConflict, req.RaftAddress, s.ID)
		}
		if other, ok := n.fsm.Node(string(s.ID)); ok {
			if other.APIAddress == req.APIAddress {
				return p, fmt.Errorf("%w: API address %s is node %s's", backend.ErrNodeConflict, req.APIAddress, s.ID)
			}
			if req.PeerAddress != "" && other.PeerAddress == req.PeerAddress {
				return p, fmt.Errorf("%w: peer address %s is node %s's", backend.ErrNodeConflict, req.PeerAddress, s.ID)
			}
		}
	}
	if p.member != nil && string(p.member.Address) != req.RaftAddress {
		return p, fmt.Errorf("%w: node %s is a member at raft address %s; remove it before joining it at %s",
			backend.ErrNodeConflict, req.ID, p.member.Address, req.RaftAddress)
	}
	cur, ok := n.fsm.Node(req.ID)
	p.register = !ok || cur.APIAddress != req.APIAddress || cur.PeerAddress != req.PeerAddress || cur.KafkaAddress != req.KafkaAddress ||
		req.FeatureLevel != 0 && n.fsm.NodeFeatureLevel(req.ID) != fsm.FeatureLevel(req.FeatureLevel) ||
		req.SecretFingerprint != "" && cur.SecretFingerprint != req.SecretFingerprint
	if p.member != nil && ok {
		if cur.APIAddress != "" && cur.APIAddress != req.APIAddress {
			p.movedFrom = append(p.movedFrom, cur.APIAddress)
		}
		if cur.PeerAddress != "" && cur.PeerAddress != req.PeerAddress {
			p.movedFrom = append(p.movedFrom, cur.PeerAddress)
		}
	}
	p.done = p.member != nil && p.member.Suffrage == raft.Voter && !p.register
	return p, nil
}

// checkQuorum refuses to promote joiner when the voters that answer,
// joiner counted (it has just shown it is caught up), would not be a
// majority of the configuration with it as a voter. The leader counts
// itself; other voters are asked in parallel (voterAnswers).
func (n *Node) checkQuorum(ctx context.Context, joiner string, probe backend.NodeProbe) error {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return mapRaftError(err)
	}
	term := n.raft.CurrentTerm()
	var others []raft.Server
	voters, answering := 1, 1 // the joiner
	for _, s := range f.Configuration().Servers {
		switch {
		case s.Suffrage != raft.Voter || string(s.ID) == joiner:
		case string(s.ID) == n.cfg.NodeID:
			voters++
			answering++
		default:
			voters++
			others = append(others, s)
		}
	}
	ok := make([]bool, len(others))
	var wg sync.WaitGroup
	for i, s := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok[i] = n.voterAnswers(ctx, s, term, probe)
		}()
	}
	wg.Wait()
	var silent []string
	for i, s := range others {
		if ok[i] {
			answering++
		} else {
			silent = append(silent, string(s.ID))
		}
	}
	if answering <= voters/2 {
		return fmt.Errorf("%w: %d of %d voters would answer (not answering: %v)", backend.ErrNoQuorum, answering, voters, silent)
	}
	return nil
}

// voterAnswers reports whether voter s answers as a follower of this
// leader in term: at the address nodes call it at (its peer address, else
// its client API) when it registered one, else by its Raft address
// accepting a connection.
func (n *Node) voterAnswers(ctx context.Context, s raft.Server, term uint64, probe backend.NodeProbe) bool {
	ctx, cancel := context.WithTimeout(ctx, joinProbeTimeout)
	defer cancel()
	reg, ok := n.fsm.Node(string(s.ID))
	if !ok || reg.CallAddress() == "" {
		_, err := n.dialRaft(ctx, string(s.ID), string(s.Address))
		return err == nil
	}
	rep, err := probe(ctx, reg.CallAddress())
	return err == nil && rep.ID == string(s.ID) && rep.LeaderID == n.cfg.NodeID && rep.Term == term
}

// RemoveNode removes a node from the cluster and forgets its address. A
// removed node is no longer part of any quorum and never acknowledges a
// write again (its votes and entries are ignored); to bring its machine
// back, wipe its data and join it under a new id. It is refused with
// backend.ErrMembershipChange while another change runs, except a join of the same
// node, which it ends first.
func (n *Node) RemoveNode(ctx context.Context, id string) error {
	if !n.IsLeader() {
		return backend.ErrNotLeader
	}
	ctx, end, err := n.beginChange(ctx, false, id)
	if err != nil {
		return err
	}
	defer end()
	if !n.IsLeader() {
		return backend.ErrNotLeader
	}
	cur, err := n.member(id)
	if err != nil {
		return err
	}
	if cur == nil {
		return fmt.Errorf("%w: %q", backend.ErrUnknownNode, id)
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
	n.cluster.transferMu.Lock()
	defer n.cluster.transferMu.Unlock()
	if !n.IsLeader() {
		return backend.ErrNotLeader
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
			return fmt.Errorf("%w: %q is not a voter", backend.ErrUnknownNode, id)
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

// register proposes a node's addresses and feature level.
func (n *Node) register(ctx context.Context, reg fsm.NodeRegister) error {
	data, err := fsm.EncodeJSON(fsm.CmdNodeRegister, n.cfg.Now().UnixNano(), reg)
	if err != nil {
		return err
	}
	_, err = n.propose(ctx, data)
	return err
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

// LeaderCallAddress returns the address this node calls the leader at for
// node-to-node HTTP (forwarding a write): its registered peer address, or
// its API address when it registered none; and the leader's id. Empty
// when no leader is known or it is not registered.
func (n *Node) LeaderCallAddress() (addr, id string) {
	_, lid := n.raft.LeaderWithID()
	if lid == "" {
		return "", ""
	}
	reg, _ := n.fsm.Node(string(lid))
	return reg.CallAddress(), string(lid)
}

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
	return appliedThrough(n.fsm, n.stores.logs, index)
}

// appliedThrough is Node.appliedThrough for the state machine f of any
// Raft group of this node, whose Raft log is logs.
func appliedThrough(f *fsm.FSM, logs raft.LogStore, index uint64) bool {
	applied := f.AppliedIndex()
	if applied >= index {
		return true
	}
	if index-applied > maxNonCommandGap {
		return false
	}
	var l raft.Log
	for i := applied + 1; i <= index; i++ {
		if err := logs.GetLog(i, &l); err != nil || l.Type == raft.LogCommand {
			return false
		}
	}
	return true
}

// effectiveApplied is the index whose state the FSM holds: commit when it
// has applied every command up to it, else the FSM's applied index.
func (n *Node) effectiveApplied(commit uint64) uint64 {
	return effectiveApplied(n.fsm, n.stores.logs, commit)
}

// effectiveApplied is Node.effectiveApplied for the state machine f of
// any Raft group of this node, whose Raft log is logs. It is what a
// replica's status reports as applied, never Raft's own applied index:
// Raft counts an entry applied once it handed it to the state machine's
// goroutine, before the state machine wrote it, so a replica that reports
// Raft's may answer reads without the last writes while its status says
// it has them (docs/architecture.md, "Data groups").
func effectiveApplied(f *fsm.FSM, logs raft.LogStore, commit uint64) uint64 {
	if commit > 0 && appliedThrough(f, logs, commit) {
		return max(commit, f.AppliedIndex())
	}
	return f.AppliedIndex()
}
