package fsm

import (
	"time"

	"github.com/logd-dev/logd/group"
)

func (f *FSM) applyGroupJoin(_ uint64, now int64, c GroupJoin) any {
	return f.mutateGroup(c.Group, true, func(g *group.ConsumerGroup) (any, error) {
		return g.Join(now, group.JoinRequest{
			Member:         c.Member,
			Topics:         c.Topics,
			SessionTimeout: time.Duration(c.SessionTimeoutMs) * time.Millisecond,
			Reset:          c.Reset,
		}, fsmTopics{f: f})
	})
}
