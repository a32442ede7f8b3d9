package replication

import (
	"context"
	"fmt"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/replication/fsm"
)

// proposeGroup checks a group command on the named group against a copy
// of the applied state at the leader's time (so a refused request never
// reaches the Raft log), then proposes it stamped with that time and
// returns Apply's result.
func (b *Backend) proposeGroup(ctx context.Context, t fsm.CommandType, name string, c any) (any, error) {
	now := max(b.cfg.Now().UnixNano(), b.fsm.Now())
	// The dry run is only an early refusal; it needs a state machine that
	// has applied the whole log (not so right after a restart or while
	// other proposals are in flight). Apply checks the same rules anyway.
	if b.fsm.AppliedIndex() >= b.raft.LastIndex() {
		if err, ok := b.fsm.DryRunGroup(t, name, now, c).(error); ok {
			return nil, err
		}
	}
	data, err := fsm.EncodeJSON(t, now, c)
	if err != nil {
		return nil, err
	}
	return b.propose(ctx, data)
}

// joinGroup adds (or updates) a member of a consumer group and returns its
// assignment.
func (b *Backend) joinGroup(ctx context.Context, c fsm.GroupJoin) (group.Assignment, error) {
	if err := b.placedTopics(c.Topics); err != nil {
		return group.Assignment{}, err
	}
	return b.proposeAssignment(ctx, fsm.CmdGroupJoin, c.Group, c)
}

// groupHeartbeat keeps a member alive, completes moves of the partitions
// it released and returns its assignment.
func (b *Backend) groupHeartbeat(ctx context.Context, c fsm.GroupHeartbeat) (group.Assignment, error) {
	return b.proposeAssignment(ctx, fsm.CmdGroupHeartbeat, c.Group, c)
}

func (b *Backend) proposeAssignment(ctx context.Context, t fsm.CommandType, name string, c any) (group.Assignment, error) {
	res, err := b.proposeGroup(ctx, t, name, c)
	if err != nil {
		return group.Assignment{}, err
	}
	a, ok := res.(group.Assignment)
	if !ok {
		return group.Assignment{}, fmt.Errorf("%s: unexpected result %T", t, res)
	}
	return a, nil
}

// leaveGroup removes a member from a consumer group.
func (b *Backend) leaveGroup(ctx context.Context, c fsm.GroupLeave) error {
	_, err := b.proposeGroup(ctx, fsm.CmdGroupLeave, c.Group, c)
	return err
}

// commitGroupOffsets commits offsets for partitions a member owns.
func (b *Backend) commitGroupOffsets(ctx context.Context, c fsm.GroupCommit) error {
	ends, err := b.placedEnds(ctx, c.Offsets)
	if err != nil {
		return err
	}
	c.Ends = ends
	_, err = b.proposeGroup(ctx, fsm.CmdGroupCommit, c.Group, c)
	return err
}

// resetGroupOffsets applies an operator's offset reset (offsets already
// planned and clamped to the log's bounds).
func (b *Backend) resetGroupOffsets(ctx context.Context, c fsm.GroupResetOffsets) error {
	ends, err := b.placedEnds(ctx, c.Offsets)
	if err != nil {
		return err
	}
	c.Ends = ends
	_, err = b.proposeGroup(ctx, fsm.CmdGroupResetOffsets, c.Group, c)
	return err
}

// autoResetGroupOffset moves a partition's committed offset forward under
// the member's reset policy and returns the committed offset.
func (b *Backend) autoResetGroupOffset(ctx context.Context, c fsm.GroupAutoReset) (int64, error) {
	ends, err := b.placedEnds(ctx, []group.OffsetCommit{{TopicPartition: c.Partition, Offset: c.To}})
	if err != nil {
		return 0, err
	}
	c.Ends = ends
	res, err := b.proposeGroup(ctx, fsm.CmdGroupAutoReset, c.Group, c)
	if err != nil {
		return 0, err
	}
	off, ok := res.(int64)
	if !ok {
		return 0, fmt.Errorf("auto reset: unexpected result %T", res)
	}
	return off, nil
}

// deleteGroup deletes a consumer group that has no live members.
func (b *Backend) deleteGroup(ctx context.Context, name string) error {
	_, err := b.proposeGroup(ctx, fsm.CmdGroupDelete, name, fsm.GroupDelete{Group: name})
	return err
}

// AwaitGroupFetch reports whether a member may read a partition at its
// generation (group's fencing errors if not), against applied state, once
// this node has applied what the member already knows.
//
// A member learns its generation and its position from the leader (a
// join or heartbeat is a write, which a follower forwards), then reads
// through the node it talks to, and a follower serves what it has applied
// (docs/architecture.md). Right after a join that node may not have
// applied the join yet: it would refuse the member as unknown or fenced,
// or not know the group, although the leader just gave it the partition.
// Generations only grow, so a node that holds the group at an older
// generation than the member names (or not at all), or a partition that
// ends before the member's offset, is behind the member, not the member
// behind the group: AwaitGroupFetch waits, up to wait, for this node to
// apply more and checks again. A node still behind then fails with
// *backend.BehindError, naming the leader. A leader answers at once: it serves
// only after a barrier of its term, so it holds every generation it gave
// out.
func (b *Backend) AwaitGroupFetch(ctx context.Context, c backend.GroupFetchCheck, wait time.Duration) error {
	var checkErr error
	if err := b.awaitApplies(ctx, wait, func() string {
		checkErr = b.fsm.CheckGroupFetch(c.Group, c.Member, c.Generation, c.Partition)
		if b.IsLeader() {
			return ""
		}
		return b.lacks(c, checkErr)
	}); err != nil {
		return err
	}
	return checkErr
}

// lacks says what of c this node has not applied, given the result of
// checking c against its state; "" when it is not behind c.
func (b *Backend) lacks(c backend.GroupFetchCheck, checkErr error) string {
	if checkErr != nil {
		g, err := b.fsm.ConsumerGroup(c.Group)
		switch {
		case err != nil:
			return fmt.Sprintf("group %q (the member is at generation %d)", c.Group, c.Generation)
		case g.Generation < c.Generation:
			return fmt.Sprintf("generation %d of group %q (this node is at %d)", c.Generation, c.Group, g.Generation)
		}
		return ""
	}
	if c.Offset < 0 {
		return ""
	}
	p, err := b.fsm.Partition(c.Partition.Topic, c.Partition.Partition)
	if err != nil {
		return ""
	}
	if end := p.Log().EndOffset(); end < c.Offset {
		return fmt.Sprintf("offset %d of %s-%d (this node ends at %d)", c.Offset, c.Partition.Topic, c.Partition.Partition, end)
	}
	return ""
}
