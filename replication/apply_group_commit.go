package replication

import "github.com/logd-dev/logd/group"

// applyGroup commits offsets. The end-offset check is deterministic: the
// leader checked the offsets against its applied end before proposing,
// every append it had applied precedes this entry in the Raft log, and an
// end offset never decreases, so every replica (and every replay) sees an
// end at least as large.
func (c *GroupCommit) applyGroup(f *FSM, now int64) any {
	return f.mutateGroup(c.Group, false, func(g *group.ConsumerGroup) (any, error) {
		return nil, g.Commit(now, c.Member, c.Generation, c.Offsets, fsmTopics{f})
	})
}
