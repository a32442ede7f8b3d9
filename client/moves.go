package client

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// ReplicaMove is a change of a data group's replicas in progress, as the
// table of data groups marks it (docs/operations.md, "Data groups"), with
// what the answering node learnt of the group's progress.
type ReplicaMove struct {
	Group uint64 `json:"group"`
	// Replicas are the group's replicas in the table, the preferred
	// leader first: what the move ends at.
	Replicas []string `json:"replicas"`
	// Added are the replicas the group is to gain, Removed those it is to
	// lose.
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
	// Reason is why: "balance", "node n4 joined", "node n2 drained",
	// "node n3 not heard from", "node n5 removed", or several of those.
	Reason string `json:"reason"`
	// Since is when the move began (the meta leader's clock); Age how
	// long ago that is by the answering node's clock.
	Since time.Time     `json:"since"`
	Age   time.Duration `json:"age_ms"`
	// Voters are the group's voters as the replica on node VotersFrom
	// reported them (VotersFromLeader: the answering node knew it as the
	// group's leader); VotersError says why none is known (no replica
	// answered in time).
	Voters           []string `json:"voters"`
	VotersFrom       string   `json:"voters_from,omitempty"`
	VotersFromLeader bool     `json:"voters_from_leader"`
	VotersError      string   `json:"voters_error,omitempty"`
	// AddedVoters are the added replicas that are voters already,
	// RemovedVoters the removed ones that are voters still.
	AddedVoters   []string `json:"added_voters"`
	RemovedVoters []string `json:"removed_voters"`
}

// VotersKnown reports whether a replica of the group answered with its
// voters.
func (m ReplicaMove) VotersKnown() bool { return m.VotersError == "" && len(m.Voters) > 0 }

// Moves are the replica moves in progress as one node knows them.
type Moves struct {
	// Node is the node that answered, from the table it applied.
	Node  string        `json:"node"`
	Moves []ReplicaMove `json:"moves"`
}

// ListMoves lists the data group replica moves in progress, by group id,
// as the node the client calls knows them: from the table of data groups
// it applied, each with the group's voters as a replica of it reported
// them (docs/operations.md, "Data groups").
func (c *Client) ListMoves(ctx context.Context) (Moves, error) {
	var out Moves
	err := c.do(ctx, "ListMoves", retryAny, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.ListMoves(ctx, connect.NewRequest(&logdv1.ListMovesRequest{}))
		if err != nil {
			return fromRPC(err)
		}
		out = Moves{Node: resp.Msg.GetNodeId(), Moves: make([]ReplicaMove, 0, len(resp.Msg.GetMoves()))}
		for _, m := range resp.Msg.GetMoves() {
			out.Moves = append(out.Moves, ReplicaMove{
				Group: m.GetGroup(), Replicas: m.GetReplicas(), Added: m.GetAdded(), Removed: m.GetRemoved(), Reason: m.GetReason(),
				Since: time.UnixMilli(m.GetSinceMs()).UTC(), Age: time.Duration(m.GetAgeMs()) * time.Millisecond,
				Voters: m.GetVoters(), VotersFrom: m.GetVotersFrom(), VotersFromLeader: m.GetVotersFromLeader(), VotersError: m.GetVotersError(),
				AddedVoters: m.GetAddedVoters(), RemovedVoters: m.GetRemovedVoters(),
			})
		}
		return nil
	})
	if err != nil {
		return Moves{}, fmt.Errorf("list replica moves: %w", err)
	}
	return out, nil
}

// Kinds of BalanceStep.
const (
	// BalanceReplica moves node From's replica of the group to node To.
	BalanceReplica = "replica"
	// BalanceLeader hands the group's preferred leadership from node From
	// to node To, a replica of the group already: no data moves.
	BalanceLeader = "leader"
)

// BalanceStep is one change of a BalancePlan.
type BalanceStep struct {
	// Step is the meta leader's balancing pass, from 1: the changes of one
	// step are proposed together.
	Step  int    `json:"step"`
	Kind  string `json:"kind"`
	Group uint64 `json:"group"`
	From  string `json:"from"`
	To    string `json:"to"`
}

// NodeLoad is one placed node's replicas and preferred leaderships before
// and after a BalancePlan.
type NodeLoad struct {
	Node string `json:"node"`
	// Draining: the node is being drained; balancing gives it nothing.
	Draining       bool `json:"draining"`
	ReplicasBefore int  `json:"replicas_before"`
	ReplicasAfter  int  `json:"replicas_after"`
	LeadsBefore    int  `json:"leads_before"`
	LeadsAfter     int  `json:"leads_after"`
	// BytesBefore and BytesAfter sum the sizes of the groups it holds
	// replicas of (0 when not known).
	BytesBefore int64 `json:"bytes_before"`
	BytesAfter  int64 `json:"bytes_after"`
}

// BalancePlan is what the meta leader's balancing would change from the
// table of data groups the answering node applied, until the groups are
// balanced, assuming the moves in progress finish first.
type BalancePlan struct {
	// Node is the node that answered.
	Node string `json:"node"`
	// Groups is the number of data groups (0: nothing to balance);
	// ReplicationFactor the answering node's.
	Groups            int `json:"groups"`
	ReplicationFactor int `json:"replication_factor"`
	// Nodes are the placed nodes balancing spreads replicas over (not
	// drained).
	Nodes []string      `json:"nodes"`
	Steps []BalanceStep `json:"steps"`
	Loads []NodeLoad    `json:"loads"`
	// InProgress is the number of moves in progress now (ListMoves).
	InProgress int `json:"in_progress"`
	// Blocked says why balancing would move nothing now ("" when it
	// may); Truncated that Steps stop at the server's bound before the
	// groups are balanced.
	Blocked   string `json:"blocked,omitempty"`
	Truncated bool   `json:"truncated"`
}

// Moves counts the plan's replica moves.
func (p BalancePlan) Moves() int {
	n := 0
	for _, s := range p.Steps {
		if s.Kind == BalanceReplica {
			n++
		}
	}
	return n
}

// PlanBalance asks the node the client calls what the meta leader's
// balancing would move, from the table of data groups it applied, until
// the groups are balanced. Nothing changes.
func (c *Client) PlanBalance(ctx context.Context) (BalancePlan, error) {
	var out BalancePlan
	err := c.do(ctx, "PlanBalance", retryAny, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.PlanBalance(ctx, connect.NewRequest(&logdv1.PlanBalanceRequest{}))
		if err != nil {
			return fromRPC(err)
		}
		m := resp.Msg
		out = BalancePlan{Node: m.GetNodeId(), Groups: int(m.GetGroups()), ReplicationFactor: int(m.GetReplicationFactor()),
			Nodes: m.GetNodes(), InProgress: int(m.GetInProgress()), Blocked: m.GetBlocked(), Truncated: m.GetTruncated(),
			Steps: make([]BalanceStep, 0, len(m.GetSteps())), Loads: make([]NodeLoad, 0, len(m.GetLoads()))}
		for _, s := range m.GetSteps() {
			out.Steps = append(out.Steps, BalanceStep{Step: int(s.GetStep()), Kind: s.GetKind(), Group: s.GetGroup(), From: s.GetFrom(), To: s.GetTo()})
		}
		for _, l := range m.GetLoads() {
			out.Loads = append(out.Loads, NodeLoad{Node: l.GetNode(), Draining: l.GetDraining(),
				ReplicasBefore: int(l.GetReplicasBefore()), ReplicasAfter: int(l.GetReplicasAfter()),
				LeadsBefore: int(l.GetLeadsBefore()), LeadsAfter: int(l.GetLeadsAfter()),
				BytesBefore: l.GetBytesBefore(), BytesAfter: l.GetBytesAfter()})
		}
		return nil
	})
	if err != nil {
		return BalancePlan{}, fmt.Errorf("plan balance: %w", err)
	}
	return out, nil
}
