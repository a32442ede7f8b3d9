package replication

import "github.com/logd-dev/logd/group"

// applyGroup sets the offsets the leader planned. It clamps only to the end
// offset (which never decreases, see GroupCommit); the log start is not
// consulted here because a replay after a restart would see a later start
// than the original apply did.
func (c *GroupResetOffsets) applyGroup(f *FSM, now int64) any {
	return f.mutateGroup(c.Group, true, func(g *group.ConsumerGroup) (any, error) {
		return nil, g.ResetOffsets(now, c.Offsets, fsmTopics{f})
	})
}
