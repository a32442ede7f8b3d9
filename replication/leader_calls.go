package replication

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/logd-dev/logd/backend"
)

// Calls to the meta group's leader for a service above the node (the
// Kafka listener's share coordinator, say): a node that does not lead
// hands the leader a request of the service over the Raft port, between
// members of the cluster, authenticated as Raft's traffic is. The node
// knows nothing of the request; the service's handler on the leader
// answers it.

// callLeader carries a service's request to the meta leader
// (groupCall.Service, Body; the answer's Result is the handler's answer
// as a JSON string).
const callLeader = "leader"

// HandleLeaderCalls sets the handler of service's calls (nil: none; a
// call then fails with backend.ErrNotLeader). h answers a request from
// node from (its node id, as the caller says) while this node leads the
// meta group; its error is returned to the caller (a backend error keeps
// its sentinel).
func (n *Node) HandleLeaderCalls(service string, h func(ctx context.Context, from string, req []byte) ([]byte, error)) {
	if h == nil {
		n.leaderCalls.Delete(service)
		return
	}
	n.leaderCalls.Store(service, h)
}

// CallLeader sends req for service to the meta group's leader and returns
// its handler's answer. It fails with backend.ErrNotLeader when no leader
// is known, this node leads (the caller serves it itself), or the leader
// does not answer service; an error of the transport leaves the outcome
// unknown. ctx bounds the call.
func (n *Node) CallLeader(ctx context.Context, service string, req []byte) ([]byte, error) {
	addr, id := n.raft.LeaderWithID()
	if addr == "" || string(id) == n.cfg.NodeID || n.stores.port == nil {
		return nil, fmt.Errorf("%w: no other node leads", backend.ErrNotLeader)
	}
	call, err := json.Marshal(groupCall{Kind: callLeader, MetaIndex: n.fsm.AppliedIndex(), Service: service, Body: req, From: n.cfg.NodeID})
	if err != nil {
		return nil, err
	}
	out, err := n.stores.port.Call(ctx, string(addr), 0, call)
	if err != nil {
		return nil, err
	}
	var ans groupAnswer
	if err := json.Unmarshal(out, &ans); err != nil {
		return nil, fmt.Errorf("leader call %s: answer from %s: %w", service, id, err)
	}
	if ans.Err != nil {
		return nil, ans.Err.decode()
	}
	var body []byte
	if err := json.Unmarshal(ans.Result, &body); err != nil {
		return nil, fmt.Errorf("leader call %s: answer from %s: %w", service, id, err)
	}
	return body, nil
}

// answerLeaderCall answers a callLeader on this node.
func (n *Node) answerLeaderCall(ctx context.Context, call groupCall) groupAnswer {
	h, ok := n.leaderCalls.Load(call.Service)
	if !ok || !n.IsLeader() {
		return groupAnswer{Err: encodeWireError(fmt.Errorf("%w: leader call %s", backend.ErrNotLeader, call.Service))}
	}
	out, err := h.(func(context.Context, string, []byte) ([]byte, error))(ctx, call.From, call.Body)
	if err == nil {
		// The answer's Result is JSON: the bytes as a string.
		var res []byte
		if res, err = json.Marshal(out); err == nil {
			return groupAnswer{Result: res}
		}
	}
	return groupAnswer{Err: encodeWireError(err)}
}
