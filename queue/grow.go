package queue

import "math"

// Grow extends the group to n partitions when its topic gained some: a new
// partition starts empty, with every offset from 0 on still to work (a
// group created to take only new records takes all of them too, as
// nothing was appended before the growth). Counts never shrink: n at or
// below the group's partitions changes nothing. It reports whether the
// group grew.
func (q *Group) Grow(n int) bool {
	if n <= len(q.parts) {
		return false
	}
	for len(q.parts) < n {
		q.parts = append(q.parts, &partitionState{Wake: math.MaxInt64})
	}
	return true
}
