package replication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/replication/fsm"
)

// The consumer group commands: each goes to the group's home
// (groups_route.go), where it is checked against a copy of the applied
// state first (so a refused request never reaches the Raft log), then
// proposed stamped with the proposer's time. Below fsm.HashedGroupsLevel,
// or without data groups, every group's home is the meta group, and a
// node that does not lead it refuses the command (the server forwards
// group writes to the meta leader then), as before.

// groupCommand proposes c, a command of kind t on the named group, in its
// home and returns the result.
func (b *Backend) groupCommand(ctx context.Context, t fsm.CommandType, name string, c any) (any, error) {
	if home, _ := b.knownHome(name); home == 0 && !b.RoutesGroups() {
		// As before the level: a follower refuses it.
		return b.proposeGroupOn(ctx, b.metaGroup(), t, name, c)
	}
	return b.routeGroup(ctx, t, name, c)
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
	res, err := b.groupCommand(ctx, t, name, c)
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
	_, err := b.groupCommand(ctx, fsm.CmdGroupLeave, c.Group, c)
	return err
}

// commitGroupOffsets commits offsets for partitions a member owns.
func (b *Backend) commitGroupOffsets(ctx context.Context, c fsm.GroupCommit) error {
	_, err := b.groupCommand(ctx, fsm.CmdGroupCommit, c.Group, c)
	return err
}

// resetGroupOffsets applies an operator's offset reset (offsets already
// planned and clamped to the log's bounds).
func (b *Backend) resetGroupOffsets(ctx context.Context, c fsm.GroupResetOffsets) error {
	_, err := b.groupCommand(ctx, fsm.CmdGroupResetOffsets, c.Group, c)
	return err
}

// autoResetGroupOffset moves a partition's committed offset forward under
// the member's reset policy and returns the committed offset.
func (b *Backend) autoResetGroupOffset(ctx context.Context, c fsm.GroupAutoReset) (int64, error) {
	res, err := b.groupCommand(ctx, fsm.CmdGroupAutoReset, c.Group, c)
	if err != nil {
		return 0, err
	}
	off, ok := res.(int64)
	if !ok {
		return 0, fmt.Errorf("auto reset: unexpected result %T", res)
	}
	return off, nil
}

// setGroupOffsets commits (or removes) offsets of a group coordinated
// outside the state machine, and needs every member at
// fsm.ExternalGroupsLevel (backend.ErrFeatureLevel before). Errors:
// group.ErrStaleGeneration when c.Fence is not the group's generation,
// group.ErrUnknownMember when members of logd's protocol are live,
// group.ErrOffsetAboveEnd, group.ErrUnknownGroupTopic,
// group.ErrInvalidGroupRequest, group.ErrConsumerGroupNotFound (removing
// offsets of a group that does not exist).
func (b *Backend) setGroupOffsets(ctx context.Context, c fsm.GroupSetOffsets) error {
	_, err := b.groupCommand(ctx, fsm.CmdGroupSetOffsets, c.Group, c)
	return err
}

// SetExternalGroupMembers tells the backend how a coordinator outside the
// state machine (the Kafka listener's, on the leader of a group's home:
// its members live in its memory only) holds a group: DeleteGroup refuses
// a group its members hold, as it refuses one with live members of logd's
// own protocol, and ExternalGroup shows them (logctl group describe).
func (b *Backend) SetExternalGroupMembers(members func(group string) backend.ExternalGroup) {
	b.external.Store(&members)
}

// externalMembers returns a group as the coordinator
// SetExternalGroupMembers named holds it (none without one).
func (n *Node) externalMembers(name string) backend.ExternalGroup {
	if f := n.external.Load(); f != nil {
		return (*f)(name)
	}
	return backend.ExternalGroup{}
}

// ExternalGroup returns a group as its Kafka coordinator holds it: for a
// group of the meta group, this node's coordinator while it leads (none
// on a follower, whose Kafka listener coordinates no such group); for a
// group in a data group, the coordinator on the home's leader, here or
// asked of it (none when it does not answer).
func (b *Backend) ExternalGroup(name string) backend.ExternalGroup {
	home := b.readHome(name)
	if home == 0 {
		if b.Node.IsLeader() {
			return b.externalMembers(name)
		}
		return backend.ExternalGroup{}
	}
	ctx, cancel := b.groupReadContext()
	defer cancel()
	var eg backend.ExternalGroup
	_ = b.inGroup(ctx, home, func(groupHandle) error {
		eg = b.externalMembers(name)
		return nil
	}, groupCall{Kind: callGroupRead, GroupRead: &groupReadCall{Op: groupReadExternal, Group: name}}, func(a groupAnswer) error {
		if len(a.Result) == 0 {
			return nil
		}
		return json.Unmarshal(a.Result, &eg)
	})
	return eg
}

// DeleteGroup deletes a consumer group without live members: of logd's
// protocol (the state machine refuses those) or of the coordinator
// SetExternalGroupMembers named, checked on the leader of the group's
// home, where it coordinates (a Kafka member that joins between the check
// and the delete finds the group without offsets). Errors:
// group.ErrConsumerGroupNotEmpty, group.ErrConsumerGroupNotFound, and
// those of every group command.
func (b *Backend) DeleteGroup(ctx context.Context, name string) error {
	_, err := b.groupCommand(ctx, fsm.CmdGroupDelete, name, fsm.GroupDelete{Group: name})
	return err
}

// AwaitGroupFetch reports whether a member may read a partition at its
// generation (group's fencing errors if not), against applied state, once
// this node has applied what the member already knows.
//
// A member learns its generation and its position from the leader of its
// group's home (a join or heartbeat is a write), then reads through the
// node it talks to, and a follower serves what it has applied
// (docs/architecture.md). Right after a join that node may not have
// applied the join yet: it would refuse the member as unknown or fenced,
// or not know the group, although the leader just gave it the partition.
// Generations only grow, so a node that holds the group at an older
// generation than the member names (or not at all), or a partition that
// ends before the member's offset, is behind the member, not the member
// behind the group: AwaitGroupFetch waits, up to wait, for this node to
// apply more and checks again. A node still behind then fails with
// *backend.BehindError, naming the leader. A leader answers at once: it
// serves only after a barrier of its term, so it holds every generation
// it gave out. A group whose home is a data group is checked on this
// node's replica of it when it serves, else (or when that replica is
// behind) on a replica of the home, the preferred leader first.
func (b *Backend) AwaitGroupFetch(ctx context.Context, c backend.GroupFetchCheck, wait time.Duration) error {
	home := b.readHome(c.Group)
	if home == 0 {
		var checkErr error
		moved := false
		if err := b.awaitApplies(ctx, wait, func() string {
			if b.readHome(c.Group) != 0 {
				// The group's placement applied meanwhile: its home
				// answers.
				moved = true
				return ""
			}
			checkErr = b.fsm.CheckGroupFetch(c.Group, c.Member, c.Generation, c.Partition)
			if b.IsLeader() {
				return ""
			}
			return lacks(b.fsm, c, checkErr)
		}); err != nil {
			return err
		}
		if !moved {
			return checkErr
		}
		home = b.readHome(c.Group)
	}
	if dg := b.dataGroup(home); dg != nil && b.groupReadable(ctx, dg) {
		err := awaitGroupFetchOn(ctx, dg.fsm, dg.applied, dg.leadsReady(), c, wait, b.LeaderAPIAddress)
		if !errors.Is(err, backend.ErrBehind) {
			return err
		}
	}
	_, err := b.askGroupRead(ctx, home, groupReadCall{Op: groupReadCheck, Check: &c, WaitMs: wait.Milliseconds()})
	return err
}

// awaitGroupFetchOn is AwaitGroupFetch on f, a replica's state machine
// whose applies signal wakes; leads when it leads its group, ready.
func awaitGroupFetchOn(ctx context.Context, f *fsm.FSM, signal *appliedSignal, leads bool, c backend.GroupFetchCheck, wait time.Duration, leader func() (string, string)) error {
	var checkErr error
	if err := awaitAppliesOn(ctx, signal, wait, leader, func() string {
		checkErr = f.CheckGroupFetch(c.Group, c.Member, c.Generation, c.Partition)
		if leads {
			return ""
		}
		return lacks(f, c, checkErr)
	}); err != nil {
		return err
	}
	return checkErr
}

// lacks says what of c the state machine f has not applied, given the
// result of checking c against it; "" when it is not behind c.
func lacks(f *fsm.FSM, c backend.GroupFetchCheck, checkErr error) string {
	if checkErr != nil {
		g, err := f.ConsumerGroup(c.Group)
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
	p, err := f.Partition(c.Partition.Topic, c.Partition.Partition)
	if err != nil {
		return ""
	}
	if end := p.Log().EndOffset(); end < c.Offset {
		return fmt.Sprintf("offset %d of %s-%d (this node ends at %d)", c.Offset, c.Partition.Topic, c.Partition.Partition, end)
	}
	return ""
}
