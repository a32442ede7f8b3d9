package histcheck

import "testing"

func commitOp(client int, call, ret int64, outcome Outcome, member string, gen, offset int64) Op {
	return op(Commit, client, call, ret, outcome, func(o *Op) {
		o.Group, o.Member, o.Generation, o.Offset = "g", member, gen, offset
		if outcome == Failed {
			o.Reason = Fenced
		}
	})
}

func fetchOp(client int, node string, leader bool, call, ret int64, offset int64) Op {
	return op(FetchCommitted, client, call, ret, OK, func(o *Op) {
		o.Group, o.Node, o.Leader, o.Offset = "g", node, leader, offset
	})
}

func joinOp(client int, call, ret int64, member string, gen int64) Op {
	return op(Join, client, call, ret, OK, func(o *Op) {
		o.Group, o.Member, o.Generation = "g", member, gen
		o.Assigned = []TopicPartition{{Topic: "t", Partition: 0}}
	})
}

func resetOp(client int, call, ret int64, outcome Outcome, offset, gen int64) Op {
	return op(Reset, client, call, ret, outcome, func(o *Op) { o.Group, o.Offset, o.Generation = "g", offset, gen })
}

func TestGroups(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []Op
		want []string
	}{
		{
			name: "commits move forward, a reset moves back, fenced commits fail",
			ops: numbered(
				fetchOp(1, "n1", true, 0, 5, NoOffset),
				joinOp(1, 0, 5, "m1", 1),
				commitOp(1, 10, 20, OK, "m1", 1, 10),
				fetchOp(2, "n1", true, 15, 18, NoOffset), // concurrent with the commit
				fetchOp(2, "n1", true, 21, 25, 10),
				commitOp(1, 30, 40, OK, "m1", 1, 5), // a lower commit changes nothing
				fetchOp(2, "n1", true, 41, 45, 10),
				joinOp(3, 50, 60, "m2", 2),
				commitOp(1, 61, 70, Failed, "m1", 1, 20),
				commitOp(3, 61, 70, OK, "m2", 2, 20),
				resetOp(4, 80, 90, OK, 3, 3),
				fetchOp(2, "n1", true, 85, 95, 3),     // after the reset
				fetchOp(5, "n2", false, 100, 101, 20), // a follower trails: it has not applied the reset yet
				fetchOp(5, "n2", false, 102, 103, 3),
				commitOp(3, 110, 120, Failed, "m2", 2, 30),
			),
		},
		{
			name: "a leader read older than an acknowledged commit",
			ops: numbered(
				commitOp(1, 10, 20, OK, "m1", 1, 40),
				fetchOp(2, "n2", true, 30, 40, 39),
			),
			want: []string{"went back: g t/0: committed 39, but 40 was established before the read by #0 c1 commit"},
		},
		{
			name: "a leader read with nothing committed after a commit",
			ops: numbered(
				commitOp(1, 10, 20, OK, "m1", 1, 40),
				fetchOp(2, "n2", true, 30, 40, NoOffset),
			),
			want: []string{"went back: g t/0: committed -1, but 40 was established"},
		},
		{
			name: "a leader read older than an earlier leader read",
			ops: numbered(
				fetchOp(2, "n1", true, 0, 10, 40),
				fetchOp(3, "n2", true, 20, 30, 35),
				resetOp(4, 5, 15, Failed, 0, 0), // a failed reset excuses nothing
			),
			want: []string{"went back: g t/0: committed 35, but 40 was established before the read by #0 c2 fetch_committed"},
		},
		{
			name: "a reset of unknown outcome may explain a step back",
			ops: numbered(
				commitOp(1, 10, 20, OK, "m1", 1, 40),
				resetOp(4, 15, 16, Unknown, 0, 0),
				fetchOp(2, "n2", true, 30, 40, 0),
			),
		},
		{
			name: "a follower went back on one node",
			ops: numbered(
				fetchOp(5, "n2", false, 100, 101, 20),
				fetchOp(5, "n2", false, 102, 103, 3),
			),
			want: []string{"went back: g t/0: client 5 on n2 read committed 3 after 20, with no reset between"},
		},
		{
			name: "a follower went back twice across one reset",
			ops: numbered(
				resetOp(4, 0, 10, OK, 3, 2),
				fetchOp(5, "n2", false, 100, 101, 20),
				fetchOp(5, "n2", false, 102, 103, 3),
				fetchOp(5, "n2", false, 104, 105, 7),
				fetchOp(5, "n2", false, 106, 107, 5),
			),
			want: []string{"went back: g t/0: client 5 on n2 read committed 5 after 7, with no reset between"},
		},
		{
			name: "a commit from a fenced generation succeeds",
			ops: numbered(
				joinOp(1, 0, 5, "m1", 1),
				joinOp(2, 10, 20, "m2", 2),
				commitOp(1, 30, 40, OK, "m1", 1, 7),
			),
			want: []string{"fenced commit succeeded: g t/0: #2 c1 commit@n1 g t/0=7 gen 1 by m1", "after generation 2 took the partition: #1 c2 join@n1 g m2 gen 2"},
		},
		{
			name: "a commit of an older generation succeeds after a reset",
			ops: numbered(
				resetOp(4, 0, 10, OK, 0, 5),
				commitOp(1, 30, 40, OK, "m1", 4, 7),
			),
			want: []string{"fenced commit succeeded", "after generation 5 took the partition: #0 c4 reset"},
		},
		{
			name: "a commit concurrent with the rebalance may succeed",
			ops: numbered(
				joinOp(2, 10, 20, "m2", 2),
				commitOp(1, 15, 40, OK, "m1", 1, 7),
			),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantVerdict(t, CheckGroups(tc.ops, Options{}), tc.want...)
		})
	}
}
