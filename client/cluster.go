package client

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/api/logdv1/logdv1connect"
)

// NodeStatus is one member's own view, as ClusterStatus gathers it.
type NodeStatus struct {
	ID          string `json:"id"`
	APIAddress  string `json:"api_address"`
	RaftAddress string `json:"raft_address"`
	// Suffrage is "voter" or "nonvoter" in the cluster configuration.
	Suffrage string `json:"suffrage"`
	// State is the node's Raft state ("Leader", "Follower", ...); empty
	// when the node did not answer (see Error).
	State        string `json:"state"`
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	// Lag is how many entries the node's applied index is behind the
	// highest commit index any member reported.
	Lag   uint64 `json:"lag_entries"`
	Ready bool   `json:"ready"`
	// FeatureLevel is the level the node registered (1 for none), as the
	// node asked first knows it; BuildLevel the level of the node's
	// build, as it reports itself (0 when it did not answer, or does not
	// report it). A node whose FeatureLevel stays below its BuildLevel
	// holds the cluster at the lower level.
	FeatureLevel uint32 `json:"feature_level"`
	BuildLevel   uint32 `json:"build_level"`
	// LeadsGroups is how many data groups the node leads, as its own
	// replicas report.
	LeadsGroups int    `json:"leads_groups"`
	Error       string `json:"error,omitempty"`
}

// DataGroupStatus is one data group, merged from every member's report:
// where the meta group places it, who leads it, and how far its replicas
// lag.
type DataGroupStatus struct {
	ID uint64 `json:"id"`
	// Replicas are the nodes the group is placed on, the preferred
	// leader first; Voters the voters of its configuration as its leader
	// (or, without one, any replica) reports them.
	Replicas []string `json:"replicas"`
	Voters   []string `json:"voters"`
	// Leader is the node whose replica reports it leads, in the highest
	// term; "" when none answered so.
	Leader      string `json:"leader"`
	Term        uint64 `json:"term"`
	CommitIndex uint64 `json:"commit_index"`
	// Lag is the most entries a replica that answered has applied
	// behind the group's highest commit index.
	Lag uint64 `json:"lag_entries"`
	// Partitions placed in the group; Bytes of their logs, the most any
	// replica reported (its replicas hold the same records, a lagging one
	// fewer).
	Partitions int   `json:"partitions"`
	Bytes      int64 `json:"bytes"`
}

// ClusterStatus is every member's status, in configuration order.
type ClusterStatus struct {
	LeaderID string `json:"leader_id"`
	Term     uint64 `json:"term"`
	// AppliedLevel is the highest feature level an applied entry needed
	// (how entries apply now; a build below it cannot run the cluster),
	// and ClusterLevel the lowest level a member registered (what the
	// cluster may use from now on), both as the leader reports them, or
	// the node asked first when the leader did not answer. 0 from servers
	// that do not report them.
	AppliedLevel uint32       `json:"applied_level"`
	ClusterLevel uint32       `json:"cluster_level"`
	Nodes        []NodeStatus `json:"nodes"`
	// DataGroups are the cluster's data groups by id; empty without.
	DataGroups []DataGroupStatus `json:"data_groups,omitempty"`
}

// ClusterStatus asks the client's node for the configuration, then every
// member (at its registered API address) for its own status, in parallel.
// A member that does not answer is listed with its error.
func (c *Client) ClusterStatus(ctx context.Context) (ClusterStatus, error) {
	st, err := c.Status(ctx)
	if err != nil {
		return ClusterStatus{}, err
	}
	out := ClusterStatus{LeaderID: st.LeaderID, Term: st.Term, AppliedLevel: st.AppliedLevel, ClusterLevel: st.ClusterLevel,
		Nodes: make([]NodeStatus, len(st.Members))}
	// levels are the leader's feature levels, by node index; groups
	// each node's data groups.
	levels := make([][2]uint32, len(st.Members))
	groups := make([][]*logdv1.DataGroupStatus, len(st.Members))
	var wg sync.WaitGroup
	for i, m := range st.Members {
		out.Nodes[i] = NodeStatus{ID: m.ID, APIAddress: m.APIAddress, RaftAddress: m.RaftAddress, Suffrage: m.Suffrage, FeatureLevel: m.FeatureLevel}
		if m.APIAddress == "" {
			out.Nodes[i].Error = "no registered API address"
			continue
		}
		wg.Add(1)
		go func(ns *NodeStatus, levels *[2]uint32, groups *[]*logdv1.DataGroupStatus) {
			defer wg.Done()
			rpc := logdv1connect.NewLogServiceClient(c.httpClient(), c.scheme+"://"+ns.APIAddress, c.connectOpts...)
			cctx, cancel := context.WithTimeout(direct(ctx), c.opts.Timeout)
			defer cancel()
			resp, err := rpc.Status(cctx, connect.NewRequest(&logdv1.StatusRequest{}))
			if err != nil {
				ns.Error = fromRPC(err).Error()
				return
			}
			m := resp.Msg
			ns.State, ns.Term, ns.CommitIndex, ns.AppliedIndex, ns.Ready = m.GetState(), m.GetTerm(), m.GetCommitIndex(), m.GetAppliedIndex(), m.GetReady()
			ns.BuildLevel = m.GetBuildLevel()
			*levels = [2]uint32{m.GetAppliedLevel(), m.GetClusterLevel()}
			*groups = m.GetDataGroups()
		}(&out.Nodes[i], &levels[i], &groups[i])
	}
	wg.Wait()
	var commit uint64
	for i, n := range out.Nodes {
		commit = max(commit, n.CommitIndex)
		if n.State == "Leader" && n.Term >= out.Term {
			out.LeaderID, out.Term = n.ID, n.Term
			out.AppliedLevel, out.ClusterLevel = levels[i][0], levels[i][1]
		}
	}
	for i := range out.Nodes {
		if out.Nodes[i].State != "" && out.Nodes[i].AppliedIndex < commit {
			out.Nodes[i].Lag = commit - out.Nodes[i].AppliedIndex
		}
	}
	out.DataGroups = mergeDataGroups(out.Nodes, groups)
	return out, nil
}

// mergeDataGroups merges the members' reports of data groups (groups[i]
// is out's node i's) into one row per group, and counts the groups each
// node leads into nodes.
func mergeDataGroups(nodes []NodeStatus, groups [][]*logdv1.DataGroupStatus) []DataGroupStatus {
	byID := map[uint64]*DataGroupStatus{}
	var ids []uint64
	applied := map[uint64][]uint64{}
	for i, gs := range groups {
		for _, g := range gs {
			row := byID[g.GetId()]
			if row == nil {
				row = &DataGroupStatus{ID: g.GetId(), Replicas: g.GetReplicas(), Partitions: int(g.GetPartitions())}
				byID[g.GetId()] = row
				ids = append(ids, g.GetId())
			}
			if g.GetState() == "" {
				continue
			}
			row.CommitIndex = max(row.CommitIndex, g.GetCommitIndex())
			applied[g.GetId()] = append(applied[g.GetId()], g.GetAppliedIndex())
			if row.Voters == nil {
				row.Voters = g.GetVoters()
			}
			row.Bytes = max(row.Bytes, g.GetBytes())
			if g.GetState() == "Leader" && g.GetTerm() >= row.Term {
				row.Leader, row.Term, row.Voters = nodes[i].ID, g.GetTerm(), g.GetVoters()
			}
		}
	}
	slices.Sort(ids)
	out := make([]DataGroupStatus, 0, len(ids))
	for _, id := range ids {
		row := byID[id]
		for _, a := range applied[id] {
			if a < row.CommitIndex {
				row.Lag = max(row.Lag, row.CommitIndex-a)
			}
		}
		for i := range nodes {
			if nodes[i].ID == row.Leader {
				nodes[i].LeadsGroups++
			}
		}
		out = append(out, *row)
	}
	return out
}

// httpClient is the routed HTTP client the client's calls use.
func (c *Client) httpClient() connect.HTTPClient { return c.hc }

// RemoveNode removes a node from the cluster. It is a membership change:
// the leader runs one at a time.
func (c *Client) RemoveNode(ctx context.Context, id string) error {
	return c.removeNode(ctx, id, false)
}

// ForceRemoveNode is RemoveNode of a node that data groups still place
// replicas on (RemoveNode refuses it: drain it first); its replicas then
// go to the other nodes.
func (c *Client) ForceRemoveNode(ctx context.Context, id string) error {
	return c.removeNode(ctx, id, true)
}

func (c *Client) removeNode(ctx context.Context, id string, force bool) error {
	err := c.do(ctx, "RemoveNode", retryUnwritten, c.opts.Timeout, func(ctx context.Context) error {
		_, err := c.rpc.RemoveNode(ctx, connect.NewRequest(&logdv1.RemoveNodeRequest{NodeId: id, Force: force}))
		return fromRPC(err)
	})
	if err != nil {
		return fmt.Errorf("remove node %s: %w", id, err)
	}
	return nil
}

// DrainNode starts (or, with undo, ends) the drain of node id's data
// group replicas: drained, the node keeps serving and holds none; it
// returns the nodes being drained.
func (c *Client) DrainNode(ctx context.Context, id string, undo bool) ([]string, error) {
	var out []string
	err := c.do(ctx, "DrainNode", retryUnwritten, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.DrainNode(ctx, connect.NewRequest(&logdv1.DrainNodeRequest{NodeId: id, Undo: undo}))
		if err != nil {
			return fromRPC(err)
		}
		out = resp.Msg.Draining
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("drain node %s: %w", id, err)
	}
	return out, nil
}

// TransferLeadership hands leadership to node id, or to the most
// up-to-date voter when id is empty, and returns the new leader's id and
// address when known.
func (c *Client) TransferLeadership(ctx context.Context, id string) (leaderID, leaderAddress string, err error) {
	err = c.do(ctx, "TransferLeadership", retryUnwritten, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.TransferLeadership(ctx, connect.NewRequest(&logdv1.TransferLeadershipRequest{NodeId: id}))
		if err != nil {
			return fromRPC(err)
		}
		leaderID, leaderAddress = resp.Msg.GetLeaderId(), resp.Msg.GetLeaderAddress()
		return nil
	})
	if err != nil {
		return "", "", fmt.Errorf("transfer leadership: %w", err)
	}
	return leaderID, leaderAddress, nil
}
