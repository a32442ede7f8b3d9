package histcheck

import "testing"

func TestMembership(t *testing.T) {
	remove := op(RemoveNode, 9, 100, 200, OK, func(o *Op) { o.Target = "n3" })
	add := op(AddNode, 9, 500, 600, OK, func(o *Op) { o.Target = "n3" })
	at := func(node string, call, ret int64, outcome Outcome) Op {
		o := appendOp(1, call, ret, outcome, "v", 0)
		o.Node = node
		return o
	}
	for _, tc := range []struct {
		name string
		ops  []Op
		want []string
	}{
		{
			name: "acks before the removal, refusals after, acks after the re-add",
			ops: numbered(
				remove,
				at("n3", 50, 150, OK), // overlaps the removal
				at("n3", 250, 260, Failed),
				at("n3", 270, 280, Unknown),
				at("n1", 270, 280, OK),
				op(Read, 2, 300, 310, OK, func(o *Op) { o.Node = "n3" }), // reads are not acks
				add,
				at("n3", 650, 660, OK),
			),
		},
		{
			name: "a removed node acknowledges",
			ops: numbered(
				remove,
				at("n3", 250, 260, OK),
				add,
			),
			want: []string{"removed node n3 acknowledged #1 c1 append@n3", "after its removal #0 c9 remove_node@n1 n3 [100, 200]"},
		},
		{
			name: "a removed node acknowledges with no re-add",
			ops: numbered(
				remove,
				op(Commit, 4, 900, 910, OK, func(o *Op) { o.Node = "n3"; o.Group = "g" }),
			),
			want: []string{"removed node n3 acknowledged #1 c4 commit@n3"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantVerdict(t, CheckMembership(tc.ops, Options{}), tc.want...)
		})
	}
}
