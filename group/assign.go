package group

import (
	"slices"
	"sort"
)

// AssignPartitions computes a sticky, balanced assignment of the n
// partitions of one topic to members (sorted, distinct ids). owners[p] is
// partition p's current owner ("" for none; an owner not in members is
// treated as gone). The result names a member for every partition.
//
// Guarantees, each with a test:
//   - every partition has exactly one owner from members;
//   - counts differ by at most one between members;
//   - a partition keeps its owner unless that owner is gone or holds more
//     than its share, so a member unaffected by a join or leave keeps all
//     of its partitions (the extra shares go to the members that already
//     hold the most, so as few partitions as possible move);
//   - the result depends only on the inputs (no map order, no randomness).
func AssignPartitions(members []string, n int32, owners []string) []string {
	out := make([]string, n)
	if len(members) == 0 || n <= 0 {
		return out
	}
	live := make(map[string]int, len(members))
	for _, m := range members {
		live[m] = 0
	}
	for p := int32(0); p < n; p++ {
		if p < int32(len(owners)) {
			if _, ok := live[owners[p]]; ok {
				live[owners[p]]++
			}
		}
	}
	// The r members that receive one partition more than the others are
	// those that hold the most now (ties by id), so fewest partitions move.
	order := slices.Clone(members)
	sort.SliceStable(order, func(i, j int) bool {
		ci, cj := live[order[i]], live[order[j]]
		if ci != cj {
			return ci > cj
		}
		return order[i] < order[j]
	})
	m := int32(len(members))
	q, r := n/m, n%m
	quota := make(map[string]int32, len(members))
	for i, id := range order {
		quota[id] = q
		if int32(i) < r {
			quota[id]++
		}
	}
	kept := make(map[string]int32, len(members))
	for p := int32(0); p < n; p++ {
		if p >= int32(len(owners)) {
			continue
		}
		o := owners[p]
		if _, ok := live[o]; ok && kept[o] < quota[o] {
			out[p] = o
			kept[o]++
		}
	}
	next := 0 // members before next are full
	for p := int32(0); p < n; p++ {
		if out[p] != "" {
			continue
		}
		for kept[members[next]] >= quota[members[next]] {
			next++
		}
		out[p] = members[next]
		kept[members[next]]++
	}
	return out
}
