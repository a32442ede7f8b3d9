package group

import "slices"

// TopicGrew hands out the partitions a topic gained: called at the
// command that grew it (now is its time), it rebalances a group one of
// whose live members subscribes to the topic, so the new partitions are
// owned from the next generation, which the members learn at their next
// heartbeat. The partitions existing before keep their owners and offsets
// unless the balance moves them (cooperatively, as at a join); a new
// partition has no committed offset, so its owner starts it at its reset
// policy's position (it is empty, so earliest and latest agree). A group
// with no such member (Kafka groups included: their members live outside
// this package and their clients see the partitions in metadata) is left
// as it is. It reports whether the generation changed.
func (g *ConsumerGroup) TopicGrew(now int64, topic string, topics Topics) bool {
	subscribed := false
	for _, m := range g.Members {
		if _, ok := slices.BinarySearch(m.Topics, topic); ok {
			subscribed = true
			break
		}
	}
	if !subscribed {
		return false
	}
	gen := g.Generation
	g.Expire(now, topics)
	g.cgRebalance(now, topics)
	return g.Generation != gen
}
