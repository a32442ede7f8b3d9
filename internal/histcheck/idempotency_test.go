package histcheck

import "testing"

func keyedAppend(client int, call, ret int64, outcome Outcome, key, value string, offset int64) Op {
	o := appendOp(client, call, ret, outcome, value, offset)
	o.Key = key
	return o
}

func TestIdempotency(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []Op
		want []string
	}{
		{
			name: "a retry returns the original offset",
			ops: numbered(
				keyedAppend(1, 0, 10, Unknown, "k1", "a", 0),
				keyedAppend(1, 11, 20, OK, "k1", "a", 0),
				keyedAppend(1, 21, 30, OK, "k1", "a", 0),
				keyedAppend(2, 0, 10, OK, "k2", "b", 1),
				scanOp("n1", 0, "a", "b"),
			),
		},
		{
			name: "a retry answered with another offset",
			ops: numbered(
				keyedAppend(1, 0, 10, OK, "k1", "a", 0),
				keyedAppend(1, 11, 20, OK, "k1", "a", 3),
			),
			want: []string{`key "k1" of t answered at 0@0 by #0`, "but at 0@3 by #1"},
		},
		{
			name: "a key written twice",
			ops: numbered(
				keyedAppend(1, 0, 10, Unknown, "k1", "a", 0),
				keyedAppend(1, 11, 20, OK, "k1", "a", 1),
				scanOp("n1", 0, "a", "a"),
			),
			want: []string{`key "k1" of t written twice: n1 holds "a" at [0@0 0@1]`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantVerdict(t, CheckIdempotency(tc.ops, Options{}), tc.want...)
		})
	}
}
