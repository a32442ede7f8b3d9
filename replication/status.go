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
	st.DataGroups = n.dataGroupStatus()
	return st
}

// dataGroupStatus is the table of data groups with this node's replicas.
func (n *Node) dataGroupStatus() []backend.DataGroupStatus {
	tab := n.fsm.DataGroups()
	if len(tab.Groups) == 0 {
		return nil
	}
	local := map[uint64]DataGroupReplica{}
	for _, r := range n.DataGroupReplicas() {
		local[r.ID] = r
	}
	parts := map[uint64]int{}
	for _, t := range n.fsm.Topics() {
		for _, g := range t.Placement {
			parts[g]++
		}
	}
	out := make([]backend.DataGroupStatus, len(tab.Groups))
	for i, g := range tab.Groups {
		ds := backend.DataGroupStatus{ID: g.ID, Replicas: g.Replicas, Partitions: parts[g.ID]}
		if g.Move != nil {
			m := moveOf(g.Move)
			ds.Move = &m
		}
		if r, ok := local[g.ID]; ok {
			ds.Bytes = fsmBytes(r.FSM)
			_, lid := r.Raft.LeaderWithID()
			ds.State, ds.LeaderID, ds.Term = r.Raft.State().String(), string(lid), r.Raft.CurrentTerm()
			ds.CommitIndex, ds.AppliedIndex = r.Raft.CommitIndex(), r.Raft.AppliedIndex()
			if f := r.Raft.GetConfiguration(); f.Error() == nil {
				var voters []raft.Server
				for _, s := range f.Configuration().Servers {
					if s.Suffrage == raft.Voter {
						ds.Voters = append(ds.Voters, string(s.ID))
						voters = append(voters, s)
					}
				}
				if dg := n.dataGroup(g.ID); dg != nil && dg.obs != nil && r.Raft.State() == raft.Leader {
					ds.Followers = dg.obs.Get(n.cfg.NodeID, voters, 0).Followers
				}
			}
		}
		out[i] = ds
	}
	return out
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
