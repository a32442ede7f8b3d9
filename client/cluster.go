package client

import (
	"context"
	"fmt"
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
	Error string `json:"error,omitempty"`
}

// ClusterStatus is every member's status, in configuration order.
type ClusterStatus struct {
	LeaderID string       `json:"leader_id"`
	Term     uint64       `json:"term"`
	Nodes    []NodeStatus `json:"nodes"`
}

// ClusterStatus asks the client's node for the configuration, then every
// member (at its registered API address) for its own status, in parallel.
// A member that does not answer is listed with its error.
func (c *Client) ClusterStatus(ctx context.Context) (ClusterStatus, error) {
	st, err := c.Status(ctx)
	if err != nil {
		return ClusterStatus{}, err
	}
	out := ClusterStatus{LeaderID: st.LeaderID, Term: st.Term, Nodes: make([]NodeStatus, len(st.Members))}
	var wg sync.WaitGroup
	for i, m := range st.Members {
		out.Nodes[i] = NodeStatus{ID: m.ID, APIAddress: m.APIAddress, RaftAddress: m.RaftAddress, Suffrage: m.Suffrage}
		if m.APIAddress == "" {
			out.Nodes[i].Error = "no registered API address"
			continue
		}
		wg.Add(1)
		go func(ns *NodeStatus) {
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
		}(&out.Nodes[i])
	}
	wg.Wait()
	var commit uint64
	for _, n := range out.Nodes {
		commit = max(commit, n.CommitIndex)
		if n.State == "Leader" && n.Term >= out.Term {
			out.LeaderID, out.Term = n.ID, n.Term
		}
	}
	for i := range out.Nodes {
		if out.Nodes[i].State != "" && out.Nodes[i].AppliedIndex < commit {
			out.Nodes[i].Lag = commit - out.Nodes[i].AppliedIndex
		}
	}
	return out, nil
}

// httpClient is the routed HTTP client the client's calls use.
func (c *Client) httpClient() connect.HTTPClient { return c.hc }

// RemoveNode removes a node from the cluster. It is a membership change:
// the leader runs one at a time.
func (c *Client) RemoveNode(ctx context.Context, id string) error {
	err := c.do(ctx, "RemoveNode", retryUnwritten, c.opts.Timeout, func(ctx context.Context) error {
		_, err := c.rpc.RemoveNode(ctx, connect.NewRequest(&logdv1.RemoveNodeRequest{NodeId: id}))
		return fromRPC(err)
	})
	if err != nil {
		return fmt.Errorf("remove node %s: %w", id, err)
	}
	return nil
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
