package replication

import "github.com/logd-dev/logd/group"

func (c *GroupLeave) applyGroup(f *FSM, now int64) any {
	return f.mutateGroup(c.Group, false, func(g *group.ConsumerGroup) (any, error) {
		g.Leave(now, c.Member, fsmTopics{f})
		return nil, nil
	})
}
