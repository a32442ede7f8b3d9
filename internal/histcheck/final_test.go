package histcheck

import "testing"

func scanOp(node string, partition int32, values ...string) Op {
	o := Op{Kind: Scan, Node: node, Call: 1000, Return: 1001, Outcome: OK, Topic: "t", Partition: partition}
	for i, v := range values {
		o.Records = append(o.Records, Record{Offset: int64(i), Value: v})
	}
	return o
}

func TestFinalReads(t *testing.T) {
	acks := []Op{
		appendOp(1, 0, 10, OK, "a", 0),
		appendOp(1, 11, 20, Unknown, "b", 0),
		appendOp(1, 21, 30, OK, "c", 1),
		appendOp(1, 31, 40, Failed, "d", 0),
	}
	with := func(scans ...Op) []Op { return numbered(append(append([]Op(nil), acks...), scans...)...) }
	for _, tc := range []struct {
		name string
		ops  []Op
		want []string
	}{
		{name: "every node holds every ack", ops: with(scanOp("n1", 0, "a", "c"), scanOp("n2", 0, "a", "c"))},
		{name: "an unknown append may be held", ops: with(scanOp("n1", 0, "a", "c", "b"))},
		{name: "lost", ops: with(scanOp("n1", 0, "a", "c"), scanOp("n2", 0, "a")), want: []string{`lost: n2 does not hold "c", acked at t/0@1`, "diverged: t/0 n1 holds 2 records, n2 holds 1"}},
		{name: "inconsistent", ops: with(scanOp("n1", 0, "c", "a")), want: []string{`inconsistent: "a" acked at t/0@0, n1 holds it at t/0@1`}},
		{name: "duplicate", ops: with(scanOp("n1", 0, "a", "c", "a")), want: []string{`duplicate: n1 holds "a" at t/0@0 and t/0@2`}},
		{name: "unexpected", ops: with(scanOp("n1", 0, "a", "c", "zz")), want: []string{`unexpected: n1 holds "zz" at t/0@2, which no client appended`}},
		{name: "a failed append is held", ops: with(scanOp("n1", 0, "a", "c", "d")), want: []string{`unexpected: n1 holds "d" at t/0@2, whose append failed (#3 c1 append@n1 t/0 "d"`}},
		{name: "gap", ops: with(func() Op { o := scanOp("n1", 0, "a", "c"); o.Records[1].Offset = 5; return o }()), want: []string{"gap: n1 t/0: offset 5 follows 0", `inconsistent: "c" acked at t/0@1, n1 holds it at t/0@5`}},
		{name: "diverged", ops: with(scanOp("n1", 0, "a", "c", "b"), scanOp("n2", 0, "a", "c", "d")), want: []string{`diverged: t/0 n1 holds "b" at 2, n2 holds "d" at 2`}},
		{name: "another topic is not classified", ops: with(func() Op { o := scanOp("n1", 0, "x"); o.Topic = "dlq"; return o }(), scanOp("n1", 0, "a", "c"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantVerdict(t, CheckFinalReads(tc.ops, Options{}), tc.want...)
		})
	}
}

func TestFinalReadsBounded(t *testing.T) {
	var ops []Op
	for i := range 100 {
		ops = append(ops, appendOp(1, int64(i), int64(i), OK, string(rune('A'+i)), int64(i)))
	}
	ops = append(ops, scanOp("n1", 0))
	v := CheckFinalReads(numbered(ops...), Options{MaxViolations: 5})
	if len(v.Violations) != 5 || v.More != 95 {
		t.Fatalf("want 5 violations and 95 more, got %d and %d:\n%s", len(v.Violations), v.More, v.String())
	}
}
