package histcheck

import "testing"

func claimOp(client int, call, ret int64, ds ...Delivery) Op {
	return op(Claim, client, call, ret, OK, func(o *Op) { o.Group, o.Deliveries = "q", ds })
}

func delivery(offset int64, token string, count int, deadline int64) Delivery {
	return Delivery{Topic: "t", Partition: 0, Offset: offset, Token: token, Count: count, Deadline: deadline}
}

func tokenOp(kind Kind, client int, call, ret int64, outcome Outcome, offset int64, token string, set func(*Op)) Op {
	return op(kind, client, call, ret, outcome, func(o *Op) {
		o.Group, o.Offset, o.Token = "q", offset, token
		if outcome == Failed {
			o.Reason = Stale
		}
		if set != nil {
			set(o)
		}
	})
}

func revocable(d Delivery) Delivery {
	d.Revocable = true
	return d
}

func finalOp(offset int64, state State, dlq int) Op {
	return op(QueueFinal, 0, 1000, 1001, OK, func(o *Op) { o.Group, o.Offset, o.State, o.DeadLetters = "q", offset, state, dlq })
}

func TestQueues(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []Op
		opt  Options
		want []string
	}{
		{
			name: "leases expire, are extended, acked; stale tokens refused",
			ops: numbered(
				claimOp(1, 0, 10, delivery(0, "a1", 1, 100), delivery(1, "b1", 1, 100)),
				tokenOp(Extend, 1, 50, 60, OK, 0, "a1", func(o *Op) { o.Deadline = 200 }),
				claimOp(2, 110, 120, delivery(1, "b2", 2, 300)), // b1 expired at 100
				tokenOp(Ack, 1, 130, 140, Failed, 1, "b1", nil),
				tokenOp(Ack, 2, 150, 160, OK, 1, "b2", nil),
				tokenOp(Ack, 2, 161, 170, OK, 1, "b2", nil), // a repeated ack is a duplicate
				tokenOp(Nack, 1, 180, 190, OK, 0, "a1", func(o *Op) { o.Permanent = true }),
				tokenOp(Extend, 1, 191, 195, Failed, 0, "a1", nil),
				finalOp(0, DeadLettered, 1),
				finalOp(1, Acked, 0),
			),
		},
		{
			name: "an ack whose outcome was unknown applied in the lease; its retry after the lease is a duplicate",
			ops: numbered(
				claimOp(1, 0, 10, delivery(0, "a1", 1, 100)),
				tokenOp(Ack, 1, 90, 150, Unknown, 0, "a1", nil),
				tokenOp(Ack, 1, 160, 170, OK, 0, "a1", func(o *Op) { o.Duplicate = true }),
				finalOp(0, Acked, 0),
			),
		},
		{
			name: "an ack accepted after the lease, not as a duplicate",
			ops: numbered(
				claimOp(1, 0, 10, delivery(0, "a1", 1, 100)),
				tokenOp(Ack, 1, 90, 150, Unknown, 0, "a1", nil),
				tokenOp(Ack, 1, 160, 170, OK, 0, "a1", nil),
				finalOp(0, Acked, 0),
			),
			want: []string{"token a1 [160, 170] succeeded after the lease expired at 100"},
		},
		{
			name: "a duplicate whose first ack began after the lease",
			ops: numbered(
				claimOp(1, 0, 10, delivery(0, "a1", 1, 100)),
				tokenOp(Ack, 1, 120, 150, Unknown, 0, "a1", nil),
				tokenOp(Ack, 1, 160, 170, OK, 0, "a1", func(o *Op) { o.Duplicate = true }),
				finalOp(0, Acked, 0),
			),
			want: []string{"token a1 [160, 170] succeeded after the lease expired at 100"},
		},
		{
			name: "a nack ends the lease, the record is claimed again",
			ops: numbered(
				claimOp(1, 0, 10, delivery(0, "a1", 1, 100)),
				tokenOp(Nack, 1, 20, 30, OK, 0, "a1", nil),
				claimOp(2, 25, 35, delivery(0, "a2", 2, 200)),
				tokenOp(Ack, 2, 40, 50, OK, 0, "a2", nil),
				finalOp(0, Acked, 0),
			),
		},
		{
			name: "two live leases",
			ops: numbered(
				claimOp(1, 0, 10, delivery(0, "a1", 1, 100)),
				claimOp(2, 50, 60, delivery(0, "a2", 2, 200)),
			),
			want: []string{"two live leases: q t/0@0: delivery 1 (token a1, held [10, 100)", "delivery 2 (token a2, held [60, 200)"},
		},
		{
			name: "clock slack forgives a small overlap",
			opt:  Options{ClockSlack: 10},
			ops: numbered(
				claimOp(1, 0, 10, delivery(0, "a1", 1, 100)),
				claimOp(2, 85, 95, delivery(0, "a2", 2, 200)),
			),
		},
		{
			name: "an ack with a superseded token succeeds",
			ops: numbered(
				claimOp(1, 0, 10, delivery(0, "a1", 1, 100)),
				claimOp(2, 110, 120, delivery(0, "a2", 2, 300)),
				tokenOp(Ack, 1, 130, 140, OK, 0, "a1", nil),
			),
			want: []string{"stale token accepted: q t/0@0: #2 c1 ack@n1 q t/0@0 token a1", "succeeded after delivery 2 was handed out by #1", "succeeded after the lease expired at 100"},
		},
		{
			name: "an extend after the deadline succeeds",
			ops: numbered(
				claimOp(1, 0, 10, delivery(0, "a1", 1, 100)),
				tokenOp(Extend, 1, 120, 130, OK, 0, "a1", func(o *Op) { o.Deadline = 300 }),
			),
			want: []string{"stale token accepted: q t/0@0: #1 c1 extend@n1 q t/0@0 token a1", "after the lease expired at 100"},
		},
		{
			name: "a nack after the ack succeeds",
			ops: numbered(
				claimOp(1, 0, 10, delivery(0, "a1", 1, 100)),
				tokenOp(Ack, 1, 20, 30, OK, 0, "a1", nil),
				tokenOp(Nack, 1, 40, 50, OK, 0, "a1", nil),
			),
			want: []string{"succeeded after the delivery was finished by #1 c1 ack"},
		},
		{
			name: "acked twice",
			ops: numbered(
				claimOp(1, 0, 10, delivery(0, "a1", 1, 100)),
				tokenOp(Ack, 1, 20, 30, Unknown, 0, "a1", nil),
				claimOp(2, 110, 120, delivery(0, "a2", 2, 300)),
				tokenOp(Ack, 2, 130, 140, OK, 0, "a2", nil),
				tokenOp(Ack, 1, 21, 150, OK, 0, "a1", nil),
				finalOp(0, Acked, 0),
			),
			want: []string{"acked twice: q t/0@0"},
		},
		{
			name: "final states",
			ops: numbered(
				claimOp(1, 0, 10, delivery(0, "a", 1, 100), delivery(1, "b", 1, 100), delivery(2, "c", 1, 100), delivery(3, "d", 1, 100), delivery(4, "e", 1, 100)),
				tokenOp(Ack, 1, 20, 30, OK, 2, "c", nil),
				finalOp(0, Unfinished, 0),
				finalOp(1, DeadLettered, 2),
				finalOp(2, DeadLettered, 1),
				finalOp(3, Acked, 1),
			),
			want: []string{
				"never finished: q t/0@0",
				"dead-lettered 2 times: q t/0@1",
				"acked and dead-lettered: q t/0@2",
				"acked and dead-lettered: q t/0@3",
				"no final state: q t/0@4 was delivered",
			},
		},
		{
			name: "a revocable lease released unasked: the record is handed out again before its deadline",
			ops: numbered(
				claimOp(1, 0, 10, revocable(delivery(0, "a1", 1, 100))),
				claimOp(2, 30, 40, revocable(delivery(0, "a2", 2, 200))),
				tokenOp(Ack, 1, 50, 60, Failed, 0, "a1", nil),
				tokenOp(Ack, 2, 50, 60, OK, 0, "a2", nil),
				finalOp(0, Acked, 0),
			),
		},
		{
			name: "a revocable lease is held up to its last ok call",
			ops: numbered(
				claimOp(1, 0, 10, revocable(delivery(0, "a1", 1, 100))),
				claimOp(2, 30, 40, delivery(0, "a2", 2, 200)),
				tokenOp(Extend, 1, 45, 50, OK, 0, "a1", func(o *Op) { o.Deadline = 150 }),
			),
			want: []string{"two live leases: q t/0@0: delivery 1 (token a1, held [10, 45)", "delivery 2 (token a2, held [40, 200)"},
		},
		{
			name: "a revocable lease acked after another delivery was handed out",
			ops: numbered(
				claimOp(1, 0, 10, revocable(delivery(0, "a1", 1, 100))),
				claimOp(2, 30, 40, revocable(delivery(0, "a2", 2, 200))),
				tokenOp(Ack, 1, 50, 60, OK, 0, "a1", nil),
				tokenOp(Ack, 2, 50, 60, Unknown, 0, "a2", nil),
				finalOp(0, Acked, 0),
			),
			want: []string{"stale token accepted: q t/0@0: #2 c1 ack@n1 q t/0@0 token a1 [50, 60] succeeded after delivery 2 was handed out by #1"},
		},
		{
			name: "a revocable lease acked after its deadline",
			ops: numbered(
				claimOp(1, 0, 10, revocable(delivery(0, "a1", 1, 100))),
				tokenOp(Ack, 1, 120, 130, OK, 0, "a1", nil),
				finalOp(0, Acked, 0),
			),
			want: []string{"token a1 [120, 130] succeeded after the lease expired at 100"},
		},
		{
			name: "revocable leases of two members both acked",
			ops: numbered(
				claimOp(1, 0, 10, revocable(delivery(0, "m1/d1", 1, 100))),
				claimOp(2, 5, 15, revocable(delivery(0, "m2/d1", 1, 100))),
				tokenOp(Ack, 1, 20, 30, OK, 0, "m1/d1", nil),
				tokenOp(Ack, 2, 25, 35, OK, 0, "m2/d1", nil),
				finalOp(0, Acked, 0),
			),
			want: []string{"two live leases: q t/0@0", "acked twice: q t/0@0"},
		},
		{
			name: "delivery count went back",
			ops: numbered(
				claimOp(1, 0, 10, delivery(0, "a3", 3, 100)),
				claimOp(2, 110, 120, delivery(0, "a2", 2, 300)),
			),
			want: []string{"delivery count went back: q t/0@0: delivery 2 (#1", "after delivery 3 (#0"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantVerdict(t, CheckQueues(tc.ops, tc.opt), tc.want...)
		})
	}
}
