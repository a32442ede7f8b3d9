package fsm

import (
	"fmt"

	"github.com/logd-dev/logd/group"
)

func (f *FSM) applyGroupDelete(_ uint64, now int64, c GroupDelete) any {
	if err := group.ValidateName("group", c.Group); err != nil {
		return err
	}
	f.groups.mu.Lock()
	defer f.groups.mu.Unlock()
	if err := f.groups.elsewhere(c.Group); err != nil {
		return err
	}
	g, ok := f.groups.m[c.Group]
	if !ok {
		return fmt.Errorf("%w: %q", group.ErrConsumerGroupNotFound, c.Group)
	}
	g.Expire(now, fsmTopics{f: f})
	if len(g.Members) > 0 {
		return fmt.Errorf("%w: %q has %d", group.ErrConsumerGroupNotEmpty, c.Group, len(g.Members))
	}
	delete(f.groups.m, c.Group)
	return nil
}
