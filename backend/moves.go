package backend

import "time"

// ReplicaMove is a change of a data group's replicas in progress, as the
// meta group's table of data groups marks it (docs/architecture.md, "Data
// groups"): the meta leader marks a group whose replicas a table changes
// and clears the mark once the group's voters are the table's replicas.
type ReplicaMove struct {
	// Added are the replicas the group is to gain, Removed those it is to
	// lose, sorted.
	Added, Removed []string
	// Reason is why the replicas changed: "balance", "node n4 joined",
	// "node n2 drained", "node n3 not heard from", "node n5 removed", or
	// several of those joined by ", ".
	Reason string
	// Since is when the change began, by the clock of the meta leader
	// that proposed it.
	Since time.Time
}

// MoveState is one data group's move in progress with what the node that
// answers knows of the group's progress on it (ClusterAPI.ListMoves).
type MoveState struct {
	Group uint64
	// Replicas are the group's replicas in the table, the preferred
	// leader first: what the move ends at.
	Replicas []string
	Move     ReplicaMove
	// Age is how long the move has been going on, by this node's clock.
	Age time.Duration
	// Voters are the voters of the group's configuration as VotersFrom
	// (a node id) reported them, sorted; with VotersFromLeader when this
	// node knew VotersFrom as the group's leader. VotersError says why no
	// replica answered within the bound (Voters is then nil).
	Voters           []string
	VotersFrom       string
	VotersFromLeader bool
	VotersError      string
}

// AddedVoters are the replicas the move adds that are voters already.
func (m MoveState) AddedVoters() []string { return within(m.Move.Added, m.Voters) }

// RemovedVoters are the replicas the move removes that are voters still.
func (m MoveState) RemovedVoters() []string { return within(m.Move.Removed, m.Voters) }

// within returns the ids of ids that set holds, in ids' order.
func within(ids, set []string) []string {
	var out []string
	for _, id := range ids {
		for _, s := range set {
			if s == id {
				out = append(out, id)
				break
			}
		}
	}
	return out
}

// Balance plans (ClusterAPI.PlanBalance).
const (
	// BalanceReplica is a step that moves a replica: node From's replica
	// of the group goes to node To.
	BalanceReplica = "replica"
	// BalanceLeader is a step that hands a group's preferred leadership
	// from node From to node To, a replica of the group already: no data
	// moves.
	BalanceLeader = "leader"
)

// BalanceStep is one change a balance plan makes.
type BalanceStep struct {
	// Step numbers the meta leader's balancing passes from 1: the changes
	// of one step are proposed together.
	Step int
	// Kind is BalanceReplica or BalanceLeader.
	Kind  string
	Group uint64
	From  string
	To    string
}

// NodeLoad is one placed node's replicas and preferred leaderships before
// and after a balance plan.
type NodeLoad struct {
	Node string
	// Draining: the node is being drained, so balancing gives it nothing.
	Draining                      bool
	ReplicasBefore, ReplicasAfter int
	LeadsBefore, LeadsAfter       int
	// BytesBefore and BytesAfter sum the sizes of the groups it holds
	// replicas of (as last learnt; 0 when not known).
	BytesBefore, BytesAfter int64
}

// BalancePlan is what the meta leader's balancing would change from the
// table the answering node applied, until the data groups are balanced,
// assuming the moves in progress finish (ClusterAPI.PlanBalance).
type BalancePlan struct {
	// Groups is the number of data groups in the table (0: none, nothing
	// to balance); ReplicationFactor the answering node's.
	Groups            int
	ReplicationFactor int
	// Nodes are the placed nodes balancing spreads replicas over (those
	// not drained).
	Nodes []string
	// Steps are the changes in the order balancing would make them.
	Steps []BalanceStep
	// Loads are every placed node's counts before and after Steps.
	Loads []NodeLoad
	// InProgress is the number of moves the table marks now: they count
	// against the meta leader's --max-moves before the first step.
	InProgress int
	// Blocked, when set, says why balancing would move nothing now
	// (Steps is then empty): placing, drains and dead nodes come first.
	Blocked string
	// Truncated: Steps stop at the plan's bound of steps, before the
	// groups are balanced.
	Truncated bool
}
