package replication

import "github.com/logd-dev/logd/group"

func (c *GroupHeartbeat) applyGroup(f *FSM, now int64) any {
	return f.mutateGroup(c.Group, false, func(g *group.ConsumerGroup) (any, error) {
		return g.Heartbeat(now, c.Member, c.Released, fsmTopics{f})
	})
}
