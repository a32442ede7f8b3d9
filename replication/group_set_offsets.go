package replication

import (
	"context"

	"github.com/logd-dev/logd/replication/fsm"
)

// setGroupOffsets commits (or removes) offsets of a group coordinated
// outside the state machine. It is checked against a copy of the applied
// state first, as every group command (proposeGroup), and needs every
// member at fsm.ExternalGroupsLevel (backend.ErrFeatureLevel before). Errors:
// group.ErrStaleGeneration when c.Fence is not the group's generation,
// group.ErrUnknownMember when members of logd's protocol are live,
// group.ErrOffsetAboveEnd, group.ErrUnknownGroupTopic,
// group.ErrInvalidGroupRequest, group.ErrConsumerGroupNotFound (removing
// offsets of a group that does not exist).
func (b *Backend) setGroupOffsets(ctx context.Context, c fsm.GroupSetOffsets) error {
	ends, err := b.placedEnds(ctx, c.Offsets)
	if err != nil {
		return err
	}
	c.Ends = ends
	now := max(b.cfg.Now().UnixNano(), b.fsm.Now())
	if b.fsm.AppliedIndex() >= b.raft.LastIndex() {
		if err, ok := b.fsm.DryRunGroup(fsm.CmdGroupSetOffsets, c.Group, now, c).(error); ok {
			return err
		}
	}
	_, err = b.propose(ctx, fsm.EncodeGroupSetOffsets(now, c))
	return err
}

// GroupFence returns a consumer group's generation and how many of its
// members of logd's own protocol are live by this node's clock, from
// applied state; ok is false when the group does not exist (generation 0).
// A coordinator outside the state machine forms its generations against
// the generation and fences its commits with it (SetGroupOffsets).
func (b *Backend) GroupFence(name string) (generation int64, liveMembers int, ok bool) {
	return b.fsm.GroupFence(name, max(b.cfg.Now().UnixNano(), b.fsm.Now()))
}
