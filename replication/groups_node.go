package replication

import (
	"context"
	"fmt"

	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/replication/fsm"
)

// proposeGroup checks a group command on the named group against a copy
// of the applied state at the leader's time (so a refused request never
// reaches the Raft log), then proposes it stamped with that time and
// returns Apply's result.
func (n *Node) proposeGroup(ctx context.Context, t fsm.CommandType, name string, c any) (any, error) {
	now := max(n.cfg.Now().UnixNano(), n.fsm.Now())
	// The dry run is only an early refusal; it needs a state machine that
	// has applied the whole log (not so right after a restart or while
	// other proposals are in flight). Apply checks the same rules anyway.
	if n.fsm.AppliedIndex() >= n.raft.LastIndex() {
		if err, ok := n.fsm.DryRunGroup(t, name, now, c).(error); ok {
			return nil, err
		}
	}
	data, err := fsm.EncodeJSON(t, now, c)
	if err != nil {
		return nil, err
	}
	return n.propose(ctx, data)
}

// JoinGroup adds (or updates) a member of a consumer group and returns its
// assignment.
func (n *Node) JoinGroup(ctx context.Context, c GroupJoin) (group.Assignment, error) {
	return n.proposeAssignment(ctx, fsm.CmdGroupJoin, c.Group, c)
}

// GroupHeartbeat keeps a member alive, completes moves of the partitions
// it released and returns its assignment.
func (n *Node) GroupHeartbeat(ctx context.Context, c GroupHeartbeat) (group.Assignment, error) {
	return n.proposeAssignment(ctx, fsm.CmdGroupHeartbeat, c.Group, c)
}

func (n *Node) proposeAssignment(ctx context.Context, t fsm.CommandType, name string, c any) (group.Assignment, error) {
	res, err := n.proposeGroup(ctx, t, name, c)
	if err != nil {
		return group.Assignment{}, err
	}
	a, ok := res.(group.Assignment)
	if !ok {
		return group.Assignment{}, fmt.Errorf("%s: unexpected result %T", t, res)
	}
	return a, nil
}

// LeaveGroup removes a member from a consumer group.
func (n *Node) LeaveGroup(ctx context.Context, c GroupLeave) error {
	_, err := n.proposeGroup(ctx, fsm.CmdGroupLeave, c.Group, c)
	return err
}

// CommitGroupOffsets commits offsets for partitions a member owns.
func (n *Node) CommitGroupOffsets(ctx context.Context, c GroupCommit) error {
	_, err := n.proposeGroup(ctx, fsm.CmdGroupCommit, c.Group, c)
	return err
}

// ResetGroupOffsets applies an operator's offset reset (offsets already
// planned and clamped to the log's bounds).
func (n *Node) ResetGroupOffsets(ctx context.Context, c GroupResetOffsets) error {
	_, err := n.proposeGroup(ctx, fsm.CmdGroupResetOffsets, c.Group, c)
	return err
}

// AutoResetGroupOffset moves a partition's committed offset forward under
// the member's reset policy and returns the committed offset.
func (n *Node) AutoResetGroupOffset(ctx context.Context, c GroupAutoReset) (int64, error) {
	res, err := n.proposeGroup(ctx, fsm.CmdGroupAutoReset, c.Group, c)
	if err != nil {
		return 0, err
	}
	off, ok := res.(int64)
	if !ok {
		return 0, fmt.Errorf("auto reset: unexpected result %T", res)
	}
	return off, nil
}

// DeleteGroup deletes a consumer group that has no live members.
func (n *Node) DeleteGroup(ctx context.Context, name string) error {
	_, err := n.proposeGroup(ctx, fsm.CmdGroupDelete, name, fsm.GroupDelete{Group: name})
	return err
}
