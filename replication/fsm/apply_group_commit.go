package fsm

import "github.com/logd-dev/logd/group"

// applyGroupCommit commits offsets. The end-offset check is deterministic: the
// leader checked the offsets against its applied end before proposing,
// every append it had applied precedes this entry in the Raft log, and an
// end offset never decreases, so every replica (and every replay) sees an
// end at least as large.
func (f *FSM) applyGroupCommit(_ uint64, now int64, c GroupCommit) any {
	if err := f.checkHostedOffsets(c.Ends, offsetPartitions(c.Offsets)...); err != nil {
		return err
	}
	return f.mutateGroup(c.Group, false, func(g *group.ConsumerGroup) (any, error) {
		return nil, g.Commit(now, c.Member, c.Generation, c.Offsets, fsmTopics{f, c.Ends})
	})
}
