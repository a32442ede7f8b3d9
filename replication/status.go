package replication

import (
	"strconv"

	"github.com/hashicorp/raft"
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
}

// Member is one server of the Raft configuration.
type Member struct {
	ID       string
	Address  string
	Suffrage string
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
	}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			st.Members = append(st.Members, Member{ID: string(s.ID), Address: string(s.Address), Suffrage: suffrage(s.Suffrage)})
		}
	}
	return st
}

func suffrage(s raft.ServerSuffrage) string {
	if s == raft.Voter {
		return "voter"
	}
	return "nonvoter"
}
