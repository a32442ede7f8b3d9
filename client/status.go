package client

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	logdv1 "github.com/logd-dev/logd/api/logdv1"
)

// Status describes a node and its view of the Raft cluster.
type Status struct {
	NodeID string `json:"node_id"`
	// State is the node's Raft state ("Leader", "Follower", ...).
	State         string   `json:"state"`
	LeaderID      string   `json:"leader_id"`
	LeaderAddress string   `json:"leader_address"`
	Term          uint64   `json:"term"`
	CommitIndex   uint64   `json:"commit_index"`
	AppliedIndex  uint64   `json:"applied_index"`
	LastLogIndex  uint64   `json:"last_log_index"`
	Members       []Member `json:"members"`
	// APIAddress is the node's advertised client address.
	APIAddress string `json:"api_address,omitempty"`
	// Ready reports whether the node has caught up and serves calls.
	Ready bool `json:"ready"`
	// Feature levels (docs/operations.md, "Rolling upgrade"); 0 from
	// servers that do not report them. BuildLevel is the highest the
	// node's build understands, which it registers. AppliedLevel is the
	// highest an applied entry needed: how entries apply now, and the
	// lowest build that can still run the cluster. ClusterLevel is the
	// lowest level a member registered: what the cluster may use from now
	// on.
	BuildLevel   uint32 `json:"build_level"`
	AppliedLevel uint32 `json:"applied_level"`
	ClusterLevel uint32 `json:"cluster_level"`
}

// Member is one server of the Raft configuration.
type Member struct {
	ID          string `json:"id"`
	RaftAddress string `json:"raft_address"`
	// Suffrage is "voter" or "nonvoter".
	Suffrage string `json:"suffrage"`
	// APIAddress is the member's registered client address, if known.
	APIAddress string `json:"api_address,omitempty"`
	// FeatureLevel is the feature level the member registered (1 for
	// none); 0 from servers that do not report it.
	FeatureLevel uint32 `json:"feature_level"`
}

// Status returns the status of the node the client talks to.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var out Status
	err := c.do(ctx, "Status", retryAny, c.opts.Timeout, func(ctx context.Context) error {
		resp, err := c.rpc.Status(ctx, connect.NewRequest(&logdv1.StatusRequest{}))
		if err != nil {
			return fromRPC(err)
		}
		m := resp.Msg
		out = Status{
			NodeID:        m.GetNodeId(),
			State:         m.GetState(),
			LeaderID:      m.GetLeaderId(),
			LeaderAddress: m.GetLeaderAddress(),
			Term:          m.GetTerm(),
			CommitIndex:   m.GetCommitIndex(),
			AppliedIndex:  m.GetAppliedIndex(),
			LastLogIndex:  m.GetLastLogIndex(),
			APIAddress:    m.GetApiAddress(),
			Ready:         m.GetReady(),
			BuildLevel:    m.GetBuildLevel(),
			AppliedLevel:  m.GetAppliedLevel(),
			ClusterLevel:  m.GetClusterLevel(),
		}
		for _, mb := range m.GetMembers() {
			out.Members = append(out.Members, Member{ID: mb.GetId(), RaftAddress: mb.GetRaftAddress(), Suffrage: mb.GetSuffrage(), APIAddress: mb.GetApiAddress(),
				FeatureLevel: mb.GetFeatureLevel()})
		}
		return nil
	})
	if err != nil {
		return Status{}, fmt.Errorf("status: %w", err)
	}
	return out, nil
}
