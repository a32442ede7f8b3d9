package fsm

import "github.com/logd-dev/logd/group"

func (f *FSM) applyGroupHeartbeat(_ uint64, now int64, c GroupHeartbeat) any {
	return f.mutateGroup(c.Group, false, func(g *group.ConsumerGroup) (any, error) {
		return g.Heartbeat(now, c.Member, c.Released, fsmTopics{f: f})
	})
}
