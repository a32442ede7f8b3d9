package replication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/placement"
)

// What operators see of replica moves (docs/operations.md, "Data
// groups"): the moves the meta group's table marks (fsm.ReplicaMove),
// with each group's progress as a replica of it reports it, and what
// balancing would move. Any node answers both from the table it applied:
// the table is replicated.

const (
	// moveProbeTimeout bounds how long ListMoves waits for one group's
	// voters: a group whose replicas do not answer in time is listed
	// with why.
	moveProbeTimeout = 2 * time.Second
	// moveProbes bounds the groups ListMoves asks at once.
	moveProbes = 8
	// maxBalanceSteps bounds a balance plan: a join into a large cluster
	// moves a few hundred replicas at most.
	maxBalanceSteps = 1000
)

// moveOf is m as the backend shows it.
func moveOf(m *fsm.ReplicaMove) backend.ReplicaMove {
	return backend.ReplicaMove{Added: slices.Clone(m.Added), Removed: slices.Clone(m.Removed), Reason: m.Reason, Since: time.Unix(0, m.Since)}
}

// ListMoves lists the replica moves in progress that the table this node
// applied marks, by group id, each with the group's voters as the group's
// leader (or, failing it, another replica) reports them, asked at most
// moveProbeTimeout per group.
func (n *Node) ListMoves(ctx context.Context) ([]backend.MoveState, error) {
	tab := n.fsm.DataGroups()
	now := n.cfg.Now()
	var out []backend.MoveState
	var groups []fsm.DataGroup
	for _, g := range tab.Groups {
		if g.Move == nil {
			continue
		}
		m := moveOf(g.Move)
		out = append(out, backend.MoveState{Group: g.ID, Replicas: slices.Clone(g.Replicas), Move: m, Age: max(now.Sub(m.Since), 0)})
		groups = append(groups, g)
	}
	sem := make(chan struct{}, moveProbes)
	var wg sync.WaitGroup
	for i := range out {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			pctx, cancel := context.WithTimeout(ctx, moveProbeTimeout)
			defer cancel()
			m := &out[i]
			var err error
			m.Voters, m.VotersFrom, m.VotersFromLeader, err = n.groupVoters(pctx, groups[i])
			if err != nil {
				m.VotersError = err.Error()
			}
		})
	}
	wg.Wait()
	return out, nil
}

// groupVoters returns the voters of group g's configuration (sorted), the
// node whose replica said so and whether it leads g: this node's replica
// when it leads; else the leader it knows, then its own replica; else the
// other replicas in the table's order, then those the move removes (one
// may still lead). A replica that knows no configuration yet (added, not
// reached by the leader) does not count.
func (n *Node) groupVoters(ctx context.Context, g fsm.DataGroup) ([]string, string, bool, error) {
	self := n.cfg.NodeID
	var leaderID string
	var leaderAddr raft.ServerAddress
	var own []string
	if dg := n.dataGroup(g.ID); dg != nil {
		if dg.raft.State() == raft.Leader {
			return configVoters(dg.raft), self, true, nil
		}
		addr, id := dg.raft.LeaderWithID()
		leaderID, leaderAddr = string(id), addr
		if !dg.left.Load() {
			own = configVoters(dg.raft)
		}
	}
	last := errors.New("no other replica to ask")
	ask := func(id string, addr raft.ServerAddress) ([]string, error) {
		var ans groupAnswer
		var err error
		call := groupCall{Kind: callConfig}
		if addr != "" {
			ans, err = n.callGroupAt(ctx, addr, id, g.ID, call)
		} else {
			ans, err = n.callGroup(ctx, id, g.ID, call)
		}
		if err == nil {
			err = answerErr(ans)
		}
		var voters []string
		if err == nil {
			err = json.Unmarshal(ans.Result, &voters)
		}
		if err == nil && len(voters) == 0 {
			err = errors.New("its replica knows no configuration yet")
		}
		if err != nil {
			return nil, fmt.Errorf("asked %s: %w", id, err)
		}
		return voters, nil
	}
	if leaderID != "" && leaderID != self {
		voters, err := ask(leaderID, leaderAddr)
		if err == nil {
			return voters, leaderID, true, nil
		}
		last = err
	}
	if len(own) > 0 {
		return own, self, false, nil
	}
	for _, id := range slices.Concat(g.Replicas, g.Move.Removed) {
		if id == self || id == leaderID {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		voters, err := ask(id, "")
		if err == nil {
			return voters, id, false, nil
		}
		last = err
	}
	if err := ctx.Err(); err != nil {
		return nil, "", false, fmt.Errorf("no replica of data group %d answered within %s (%v)", g.ID, moveProbeTimeout, last)
	}
	return nil, "", false, fmt.Errorf("no replica of data group %d answered: %w", g.ID, last)
}

// PlanBalance computes, from the table this node applied, what the meta
// leader's balancing (dataGroups.balance) would change until the groups
// are balanced (balancePlan). It does not know which members the meta
// leader has not heard from (their replicas are rebuilt elsewhere first,
// docs/operations.md) nor the meta leader's --max-moves.
func (n *Node) PlanBalance() (backend.BalancePlan, error) {
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return backend.BalancePlan{}, fmt.Errorf("plan balance: read the configuration: %w", err)
	}
	tab := n.fsm.DataGroups()
	return balancePlan(tab, n.groupSizes(context.Background(), tab), cf.Configuration().Servers, n.dataGroupsPerNode(tab), n.cfg.ReplicationFactor, maxBalanceSteps)
}

// balancePlan is what balancing would change from tab, the meta group's
// configuration listing servers: once plan (placing members, moving the
// replicas of nodes that left or are drained) has nothing to change,
// placement.Balance over the placed nodes not drained, applied to its own
// answer until it changes nothing, at most maxSteps times, as if each
// move finished before the next; with the groups' sizes (bytes, by
// group; a group left out counts 0).
func balancePlan(tab fsm.DataGroupTable, sizes map[uint64]int64, servers []raft.Server, perNode, rf, maxSteps int) (backend.BalancePlan, error) {
	live := slices.DeleteFunc(slices.Clone(tab.Nodes), func(id string) bool { return slices.Contains(tab.Draining, id) })
	bp := backend.BalancePlan{Groups: len(tab.Groups), ReplicationFactor: rf, Nodes: live}
	if len(tab.Groups) == 0 {
		return bp, nil
	}
	for _, g := range tab.Groups {
		if g.Move != nil {
			bp.InProgress++
		}
	}
	p := planOf(tab)
	withSizes(p, sizes)
	cur := p
	_, why, err := plan(tab, servers, perNode, rf, tab.Draining, nil, sizes)
	switch {
	case err != nil:
		bp.Blocked = "the table cannot be placed: " + err.Error()
	case why != "":
		bp.Blocked = "the meta leader changes the table first (" + why + ")"
	case len(live) == 0:
		bp.Blocked = "every placed node is drained"
	default:
		if err := placement.Check(p, live, rf); err != nil {
			bp.Blocked = "the table does not fit the nodes to balance over: " + err.Error()
		}
	}
	for step := 1; bp.Blocked == ""; step++ {
		next, mv, changed, err := placement.Balance(cur, live, rf, balanceSlack)
		if err != nil {
			return backend.BalancePlan{}, fmt.Errorf("plan balance: step %d: %w", step, err)
		}
		if !changed {
			break
		}
		if step > maxSteps {
			bp.Truncated = true
			break
		}
		if mv.Group != 0 {
			bp.Steps = append(bp.Steps, backend.BalanceStep{Step: step, Kind: backend.BalanceReplica, Group: mv.Group, From: mv.From, To: mv.To})
		}
		if mv.Back != 0 {
			bp.Steps = append(bp.Steps, backend.BalanceStep{Step: step, Kind: backend.BalanceReplica, Group: mv.Back, From: mv.To, To: mv.From})
		}
		bp.Steps = append(bp.Steps, handOvers(step, cur, next, mv)...)
		cur = next
	}
	bp.Loads = loads(tab, p, cur)
	return bp, nil
}

// handOvers are the preferred leaderships that a balancing step from p
// to next handed over within groups; the group of mv, which moved the
// preferred leader's replica, counts mv.To as its leader before (and the
// group a swap moved back, mv.From).
func handOvers(step int, p, next placement.Plan, mv placement.Move) []backend.BalanceStep {
	var out []backend.BalanceStep
	for i, g := range next {
		from := p[i].Preferred()
		switch {
		case g.ID == mv.Group && from == mv.From:
			from = mv.To
		case g.ID == mv.Back && from == mv.To:
			from = mv.From
		}
		if to := g.Preferred(); to != from {
			out = append(out, backend.BalanceStep{Step: step, Kind: backend.BalanceLeader, Group: g.ID, From: from, To: to})
		}
	}
	return out
}

// loads counts each placed node's replicas and preferred leaderships in
// before and after.
func loads(tab fsm.DataGroupTable, before, after placement.Plan) []backend.NodeLoad {
	count := func(p placement.Plan, id string) (replicas, leads int) {
		for _, g := range p {
			if i := slices.Index(g.Replicas, id); i >= 0 {
				replicas++
				if i == 0 {
					leads++
				}
			}
		}
		return replicas, leads
	}
	bytesBefore, bytesAfter := placement.Bytes(before, tab.Nodes), placement.Bytes(after, tab.Nodes)
	out := make([]backend.NodeLoad, len(tab.Nodes))
	for i, id := range tab.Nodes {
		l := backend.NodeLoad{Node: id, Draining: slices.Contains(tab.Draining, id), BytesBefore: bytesBefore[id], BytesAfter: bytesAfter[id]}
		l.ReplicasBefore, l.LeadsBefore = count(before, id)
		l.ReplicasAfter, l.LeadsAfter = count(after, id)
		out[i] = l
	}
	return out
}
