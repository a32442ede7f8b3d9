package replication

import (
	"strconv"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/replication/fsm"
)

// Status is a node's view of the Raft group.
type Status struct {
	NodeID       string
	State        string
	LeaderID     string
	LeaderAddr   string
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64
	LastLogIndex uint64
	Members      []Member
	// BuildLevel is the feature level this node registers (its build's,
	// or Config.FeatureLevel). AppliedLevel is the highest level an
	// applied entry needed (fsm.FSM.AppliedLevel), which decides how
	// entries apply. ClusterLevel is the lowest level a member of the
	// configuration registered, this node counting at BuildLevel: what
	// this node may propose now (features.go); BaseLevel when the
	// configuration cannot be read.
	BuildLevel, AppliedLevel, ClusterLevel fsm.FeatureLevel
}

// Member is one server of the Raft configuration.
type Member struct {
	ID       string
	Address  string
	Suffrage string
	// FeatureLevel is the level the member registered in the node
	// registry; fsm.BaseLevel when it registered none.
	FeatureLevel fsm.FeatureLevel
}

// Status reports the node's Raft state.
func (n *Node) Status() Status {
	stats := n.raft.Stats()
	u := func(k string) uint64 { v, _ := strconv.ParseUint(stats[k], 10, 64); return v }
	addr, id := n.raft.LeaderWithID()
	st := Status{
		NodeID:       n.cfg.NodeID,
		State:        n.raft.State().String(),
		LeaderID:     string(id),
		LeaderAddr:   string(addr),
		Term:         u("term"),
		CommitIndex:  u("commit_index"),
		AppliedIndex: n.effectiveApplied(u("commit_index")),
		LastLogIndex: n.raft.LastIndex(),
		BuildLevel:   n.buildLevel(),
		AppliedLevel: n.fsm.AppliedLevel(),
		ClusterLevel: fsm.BaseLevel,
	}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			st.Members = append(st.Members, Member{ID: string(s.ID), Address: string(s.Address), Suffrage: suffrage(s.Suffrage),
				FeatureLevel: n.fsm.NodeFeatureLevel(string(s.ID))})
		}
	}
	if l, err := n.featureLevel(); err == nil {
		st.ClusterLevel = l
	}
	return st
}

func suffrage(s raft.ServerSuffrage) string {
	if s == raft.Voter {
		return "voter"
	}
	return "nonvoter"
}
