package fsm

import "github.com/logd-dev/logd/group"

// applyGroupAutoReset moves a committed offset forward to the target the leader
// read from the log's bounds (not re-read here, for the same reason as
// GroupResetOffsets) and returns the committed offset.
func (f *FSM) applyGroupAutoReset(_ uint64, now int64, c GroupAutoReset) any {
	if err := f.checkHostedOffsets(c.Ends, c.Partition); err != nil {
		return err
	}
	return f.mutateGroup(c.Group, false, func(g *group.ConsumerGroup) (any, error) {
		return g.AutoReset(now, c.Member, c.Generation, c.Partition, c.From, c.To, fsmTopics{f, c.Ends})
	})
}
