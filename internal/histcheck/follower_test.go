package histcheck

import "testing"

func followerRead(client int, node string, call, ret int64, offset int64, value string, end int64) Op {
	o := readOp(client, call, ret, offset, value, end)
	o.Node, o.Leader = node, false
	return o
}

func TestFollowerReads(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []Op
		want []string
	}{
		{
			name: "trailing but monotonic",
			ops: numbered(
				appendOp(1, 0, 10, OK, "a", 0),
				appendOp(1, 11, 20, OK, "b", 1),
				followerRead(2, "n2", 30, 31, 1, "", 1), // trails the leader
				followerRead(2, "n2", 32, 33, 0, "a", 1),
				followerRead(2, "n2", 34, 35, 1, "b", 2),
				followerRead(2, "n3", 36, 37, 1, "", 1), // another node trails more
			),
		},
		{
			name: "end went back on one node",
			ops: numbered(
				followerRead(2, "n2", 30, 31, 0, "a", 2),
				followerRead(2, "n2", 32, 33, 0, "a", 1),
			),
			want: []string{"went back: client 2 on n2, t/0: end 1 after end 2"},
		},
		{
			name: "out of range below an end already seen",
			ops: numbered(
				followerRead(2, "n2", 30, 31, 0, "a", 2),
				func() Op { o := followerRead(2, "n2", 32, 33, 1, "", 2); return o }(),
			),
			want: []string{"went back: client 2 on n2, t/0: offset 1 out of range after end 2"},
		},
		{
			name: "an offset changed its value",
			ops: numbered(
				followerRead(2, "n2", 30, 31, 0, "a", 1),
				followerRead(2, "n2", 32, 33, 0, "x", 1),
			),
			want: []string{`changed: client 2 on n2, t/0: offset 0 read "a", then "x"`, `inconsistent: t/0 offset 0 holds "a"`},
		},
		{
			name: "a follower disagrees with the final scan",
			ops: numbered(
				scanOp("n1", 0, "a"),
				followerRead(2, "n3", 30, 31, 0, "x", 1),
			),
			want: []string{`inconsistent: t/0 offset 0 holds "a" for #0 c0 read@n1 t/0@0 -> "a" (end 1) [1000, 1001] but "x" for #1`},
		},
		{
			name: "a follower disagrees with an acknowledged append",
			ops: numbered(
				appendOp(1, 0, 10, OK, "a", 0),
				followerRead(2, "n3", 30, 31, 0, "x", 1),
			),
			want: []string{`inconsistent: t/0 offset 0 holds "a" for #0`, `but "x" for #1`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantVerdict(t, CheckFollowerReads(tc.ops, Options{}), tc.want...)
		})
	}
}
