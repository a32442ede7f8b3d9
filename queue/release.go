package queue

// Release ends the live leases whose claim named worker, as transient
// nacks with no delay and the error text why: each record is offered
// again at once, or marked for the dead-letter topic (reason
// "max_deliveries") when that was its last allowed delivery. It returns
// how many leases it ended. Partitions and records are visited in order,
// so replicas release the same records.
//
// The Kafka listener releases a share-group member's records this way
// when its session times out or it joins again after a leader change
// (docs/kafka.md, "Share groups"), without knowing their tokens.
func (q *Group) Release(now int64, worker, why string) int {
	if worker == "" {
		return 0
	}
	q.Tick(now)
	var nacks []Nack
	for pi, p := range q.parts {
		for _, r := range p.Tracked {
			if r.live(now) && r.Worker == worker {
				t := Token{Partition: int32(pi), Offset: r.Offset, Delivery: r.Deliveries, Tag: r.Tag}
				nacks = append(nacks, Nack{Token: t, HasDelay: true, Error: why})
			}
		}
	}
	if len(nacks) == 0 {
		return 0
	}
	n := 0
	for _, res := range q.Nack(now, nacks) {
		if res.Outcome == TokenOK {
			n++
		}
	}
	return n
}
