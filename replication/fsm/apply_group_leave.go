package fsm

import "github.com/logd-dev/logd/group"

func (f *FSM) applyGroupLeave(_ uint64, now int64, c GroupLeave) any {
	return f.mutateGroup(c.Group, false, func(g *group.ConsumerGroup) (any, error) {
		g.Leave(now, c.Member, fsmTopics{f: f})
		return nil, nil
	})
}
