package fsm

import "github.com/logd-dev/logd/group"

// applyGroupResetOffsets sets the offsets the leader planned. It clamps only to the end
// offset (which never decreases, see GroupCommit); the log start is not
// consulted here because a replay after a restart would see a later start
// than the original apply did.
func (f *FSM) applyGroupResetOffsets(_ uint64, now int64, c GroupResetOffsets) any {
	if err := f.checkHostedOffsets(c.Ends, offsetPartitions(c.Offsets)...); err != nil {
		return err
	}
	return f.mutateGroup(c.Group, true, func(g *group.ConsumerGroup) (any, error) {
		return nil, g.ResetOffsets(now, c.Offsets, fsmTopics{f, c.Ends})
	})
}
