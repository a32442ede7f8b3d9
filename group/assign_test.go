package group

import (
	"fmt"
	"slices"
	"testing"
)

func TestAssignPartitions(t *testing.T) {
	tests := []struct {
		name    string
		members []string
		n       int32
		owners  []string
		want    []string
	}{
		{name: "no members", members: nil, n: 3, want: []string{"", "", ""}},
		{name: "one member takes all", members: []string{"a"}, n: 3, want: []string{"a", "a", "a"}},
		{name: "fresh split in id order", members: []string{"a", "b"}, n: 4, want: []string{"a", "a", "b", "b"}},
		{name: "odd split: extra goes to first", members: []string{"a", "b"}, n: 3, want: []string{"a", "a", "b"}},
		{name: "join takes only the excess", members: []string{"a", "b"}, n: 4, owners: []string{"a", "a", "a", "a"}, want: []string{"a", "a", "b", "b"}},
		{name: "leave hands over only the leaver's", members: []string{"a", "c"}, n: 6, owners: []string{"a", "b", "c", "a", "b", "c"}, want: []string{"a", "a", "c", "a", "c", "c"}},
		{name: "sticky when balanced", members: []string{"a", "b"}, n: 4, owners: []string{"b", "a", "b", "a"}, want: []string{"b", "a", "b", "a"}},
		{name: "extra share to the current holder", members: []string{"a", "b"}, n: 3, owners: []string{"b", "b", "a"}, want: []string{"b", "b", "a"}},
		{name: "more members than partitions", members: []string{"a", "b", "c"}, n: 2, owners: []string{"c", ""}, want: []string{"c", "a"}},
		{name: "short owners slice", members: []string{"a"}, n: 2, owners: []string{"a"}, want: []string{"a", "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AssignPartitions(tt.members, tt.n, tt.owners)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("AssignPartitions(%v, %d, %v) = %v, want %v", tt.members, tt.n, tt.owners, got, tt.want)
			}
		})
	}
}

// TestAssignPartitionsProperties checks the invariants over a sequence of
// joins and leaves: full coverage, balance, and that a member not involved
// in a change keeps every partition it had if it is still within its share.
func TestAssignPartitionsProperties(t *testing.T) {
	const n = 12
	var members []string
	owners := make([]string, n)
	steps := []struct {
		join, leave string
	}{
		{join: "m1"}, {join: "m2"}, {join: "m3"}, {join: "m4"}, {leave: "m2"}, {join: "m5"}, {leave: "m1"}, {leave: "m3"}, {join: "m2"}, {join: "m6"}, {join: "m7"},
	}
	for i, s := range steps {
		if s.join != "" {
			members = append(members, s.join)
			slices.Sort(members)
		} else {
			members = slices.DeleteFunc(members, func(m string) bool { return m == s.leave })
		}
		got := AssignPartitions(members, n, owners)
		counts := map[string]int{}
		for p, o := range got {
			if !slices.Contains(members, o) {
				t.Fatalf("step %d: partition %d owned by %q, not a member of %v", i, p, o, members)
			}
			counts[o]++
		}
		lo, hi := n, 0
		for _, m := range members {
			lo, hi = min(lo, counts[m]), max(hi, counts[m])
		}
		if hi-lo > 1 {
			t.Fatalf("step %d: unbalanced %v", i, counts)
		}
		moved := 0
		for p := range got {
			if owners[p] != "" && owners[p] != got[p] && slices.Contains(members, owners[p]) {
				moved++
			}
		}
		// Only the excess over the new share may move away from live owners.
		maxMoves := 0
		prev := map[string]int{}
		for _, o := range owners {
			if slices.Contains(members, o) {
				prev[o]++
			}
		}
		for _, m := range members {
			if prev[m] > counts[m] {
				maxMoves += prev[m] - counts[m]
			}
		}
		if moved != maxMoves {
			t.Fatalf("step %d (%+v): %d partitions moved from live owners, minimum is %d: %v -> %v", i, s, moved, maxMoves, owners, got)
		}
		if s.join == "" {
			// A leave moves nothing away from the members that stay.
			if moved != 0 {
				t.Fatalf("step %d: leave moved %d partitions between staying members", i, moved)
			}
		}
		owners = got
	}
}

func BenchmarkAssignPartitions(b *testing.B) {
	members := make([]string, 50)
	for i := range members {
		members[i] = fmt.Sprintf("m%02d", i)
	}
	owners := AssignPartitions(members[1:], 1000, nil)
	for b.Loop() {
		AssignPartitions(members, 1000, owners)
	}
}
