package replication

import (
	"strconv"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/replication/fsm"
)

// Status reports the node's Raft state.
func (n *Node) Status() backend.Status {
	stats := n.raft.Stats()
	u := func(k string) uint64 { v, _ := strconv.ParseUint(stats[k], 10, 64); return v }
	addr, id := n.raft.LeaderWithID()
	st := backend.Status{
		NodeID:       n.cfg.NodeID,
		State:        n.raft.State().String(),
		LeaderID:     string(id),
		LeaderAddr:   string(addr),
		Term:         u("term"),
		CommitIndex:  u("commit_index"),
		AppliedIndex: n.effectiveApplied(u("commit_index")),
		LastLogIndex: n.raft.LastIndex(),
		BuildLevel:   backend.FeatureLevel(n.buildLevel()),
		AppliedLevel: backend.FeatureLevel(n.fsm.AppliedLevel()),
		ClusterLevel: backend.FeatureLevel(fsm.BaseLevel),
	}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			st.Members = append(st.Members, backend.Member{ID: string(s.ID), Address: string(s.Address), Suffrage: suffrage(s.Suffrage),
				FeatureLevel: backend.FeatureLevel(n.fsm.NodeFeatureLevel(string(s.ID)))})
		}
	}
	if l, err := n.featureLevel(); err == nil {
		st.ClusterLevel = backend.FeatureLevel(l)
	}
	return st
}

func suffrage(s raft.ServerSuffrage) string {
	if s == raft.Voter {
		return "voter"
	}
	return "nonvoter"
}

// RaftMetrics returns the node's Raft measurements (package
// replication/observe); on the leader, with what each member last answered.
func (n *Node) RaftMetrics() backend.RaftMetrics {
	var members []raft.Server
	if f := n.raft.GetConfiguration(); n.raft.State() == raft.Leader && f.Error() == nil {
		members = f.Configuration().Servers
	}
	return n.observer.Get(n.cfg.NodeID, members, n.raft.LastIndex())
}
