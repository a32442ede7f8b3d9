package histcheck

import (
	"cmp"
	"fmt"
	"slices"
)

// recordKey names one record of a queue group.
type recordKey struct {
	group     string
	topic     string
	partition int32
	offset    int64
}

func (k recordKey) String() string {
	return fmt.Sprintf("%s %s/%d@%d", k.group, k.topic, k.partition, k.offset)
}

func compareRecords(a, b recordKey) int {
	return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition), cmp.Compare(a.offset, b.offset))
}

// lease is one delivery an ok claim handed out, with the calls that name
// its token.
type lease struct {
	claim   *Op
	d       Delivery
	extends []*Op // extends not failed
	ends    []*Op // acks and nacks not failed
}

// deadlineBefore is the latest lease deadline the delivery can have at
// any time before `before`: its claim's, or an ok extend's that began
// earlier. ok is false when an extend of unknown outcome began earlier
// (its deadline is not known). skip is left out (the call being judged).
func (l *lease) deadlineBefore(before int64, skip *Op) (deadline int64, ok bool) {
	deadline = l.d.Deadline
	for _, e := range l.extends {
		if e == skip || e.Call >= before {
			continue
		}
		if e.Outcome != OK {
			return 0, false
		}
		deadline = max(deadline, e.Deadline)
	}
	return deadline, true
}

// live is the span in which the lease is certainly held: from its claim's
// return until its deadline (as ok extends moved it) or the first ack or
// nack that may have ended it, less the clock slack. A revocable lease
// may have ended at any time without a call: it was certainly held only
// until the last ok call naming its token began (the call found it held
// when it applied, no earlier than it began).
func (l *lease) live(slack int64) (from, to int64) {
	to = l.d.Deadline
	held := l.claim.Return
	for _, e := range l.extends {
		if e.Outcome == OK {
			to = max(to, e.Deadline)
			held = max(held, e.Call)
		}
	}
	for _, e := range l.ends {
		to = min(to, e.Call)
		if e.Outcome == OK {
			held = max(held, e.Call)
		}
	}
	if l.d.Revocable {
		to = min(to, held)
	}
	return l.claim.Return, to - slack
}

// CheckQueues checks queue groups, from ok claims, the acks, nacks and
// extends that name their tokens, and the final states:
//
//   - a record is never under two live leases at once: the spans in which
//     two deliveries of it were certainly held (from the claim's return to
//     the lease deadline, or an earlier ack or nack's call; for a
//     revocable delivery, to the last ok call naming it) never overlap,
//     by more than Options.ClockSlack;
//   - no ack, nack or extend with a stale token succeeds: not after a
//     later delivery of the record was handed out, not after the lease
//     deadline (plus ClockSlack), not after the delivery was finished (an
//     ack repeated after an ack is a duplicate, which may succeed; an ack
//     answered as a duplicate counts from the first ack of its token,
//     which may have applied while its outcome was unknown);
//   - every record ends acked once or dead-lettered once: a final state
//     of acked with no dead letter, or dead-lettered with exactly one;
//     at most one delivery's ack succeeds; a record delivered by a group
//     and topic that have final states has one;
//   - delivery counts never go backwards: a delivery claimed after
//     another was handed out has a higher count.
func CheckQueues(ops []Op, opt Options) Verdict {
	v := Verdict{Checker: "queues"}
	mx := opt.maxViolations()
	slack := max(opt.ClockSlack, 0)

	leases := map[recordKey][]*lease{}
	type tokenKey struct {
		rk    recordKey
		token string
	}
	byToken := map[tokenKey]*lease{}
	for i := range ops {
		op := &ops[i]
		if op.Kind != Claim || op.Outcome != OK {
			continue
		}
		for _, d := range op.Deliveries {
			rk := recordKey{op.Group, d.Topic, d.Partition, d.Offset}
			l := &lease{claim: op, d: d}
			leases[rk] = append(leases[rk], l)
			byToken[tokenKey{rk, d.Token}] = l
			v.Checked++
		}
	}
	var tokenOps []*Op
	for i := range ops {
		op := &ops[i]
		switch op.Kind {
		case Ack, Nack, Extend:
		default:
			continue
		}
		if op.Outcome == Failed {
			continue
		}
		l := byToken[tokenKey{recordKey{op.Group, op.Topic, op.Partition, op.Offset}, op.Token}]
		if l == nil {
			continue // a token no ok claim handed out
		}
		if op.Kind == Extend {
			l.extends = append(l.extends, op)
		} else {
			l.ends = append(l.ends, op)
		}
		if op.Outcome == OK {
			tokenOps = append(tokenOps, op)
		}
	}
	rks := make([]recordKey, 0, len(leases))
	for rk := range leases {
		rks = append(rks, rk)
	}
	slices.SortFunc(rks, compareRecords)

	for _, rk := range rks {
		ls := leases[rk]
		slices.SortFunc(ls, func(a, b *lease) int { return cmp.Compare(a.claim.Call, b.claim.Call) })
		for i, a := range ls {
			for _, b := range ls[i+1:] {
				if a.d.Token == b.d.Token {
					continue
				}
				af, at := a.live(slack)
				bf, bt := b.live(slack)
				if max(af, bf) < min(at, bt) {
					v.add(mx, "two live leases: %s: delivery %d (token %s, held [%d, %d) by %s) and delivery %d (token %s, held [%d, %d) by %s)",
						rk, a.d.Count, a.d.Token, af, at, a.claim, b.d.Count, b.d.Token, bf, bt, b.claim)
				}
				if a.claim.Return < b.claim.Call && b.d.Count <= a.d.Count {
					v.add(mx, "delivery count went back: %s: delivery %d (%s) after delivery %d (%s)", rk, b.d.Count, b.claim, a.d.Count, a.claim)
				}
			}
		}
	}

	for _, x := range tokenOps {
		rk := recordKey{x.Group, x.Topic, x.Partition, x.Offset}
		l := byToken[tokenKey{rk, x.Token}]
		// An ack answered as a duplicate was applied by an ack of the same
		// token no later than itself: one whose outcome was not known
		// (its client gave up) or an attempt within its own call. It
		// counts from the first such ack's call.
		at := x.Call
		if x.Kind == Ack && x.Duplicate {
			for _, y := range l.ends {
				if y.Kind == Ack && y.Call < at {
					at = y.Call
				}
			}
		}
		for _, other := range leases[rk] {
			if other != l && other.claim.Call > l.claim.Return && other.claim.Return < at {
				v.add(mx, "stale token accepted: %s: %s succeeded after delivery %d was handed out by %s", rk, x, other.d.Count, other.claim)
				break
			}
		}
		if dl, ok := l.deadlineBefore(x.Return, x); ok && at > dl+slack {
			v.add(mx, "stale token accepted: %s: %s succeeded after the lease expired at %d", rk, x, dl)
		}
		for _, y := range l.ends {
			if y != x && y.Outcome == OK && y.Return < x.Call && !(x.Kind == Ack && y.Kind == Ack) {
				v.add(mx, "stale token accepted: %s: %s succeeded after the delivery was finished by %s", rk, x, y)
				break
			}
		}
	}

	// Final states.
	type groupTopic struct{ group, topic string }
	finals := map[recordKey][]*Op{}
	hasFinals := map[groupTopic]bool{}
	for i := range ops {
		op := &ops[i]
		if op.Kind == QueueFinal && op.Outcome == OK {
			rk := recordKey{op.Group, op.Topic, op.Partition, op.Offset}
			finals[rk] = append(finals[rk], op)
			hasFinals[groupTopic{op.Group, op.Topic}] = true
		}
	}
	all := slices.Clone(rks)
	for rk := range finals {
		if _, delivered := leases[rk]; !delivered {
			all = append(all, rk)
		}
	}
	slices.SortFunc(all, compareRecords)
	for _, rk := range all {
		var acked, deadNack []*Op // ok acks of distinct deliveries; ok permanent nacks
		seen := map[string]bool{}
		for _, l := range leases[rk] {
			for _, e := range l.ends {
				if e.Outcome != OK {
					continue
				}
				if e.Kind == Ack && !seen[e.Token] {
					seen[e.Token] = true
					acked = append(acked, e)
				}
				if e.Kind == Nack && e.Permanent {
					deadNack = append(deadNack, e)
				}
			}
		}
		if len(acked) > 1 {
			v.add(mx, "acked twice: %s: %s and %s", rk, acked[0], acked[1])
		}
		fs := finals[rk]
		if len(fs) == 0 {
			if hasFinals[groupTopic{rk.group, rk.topic}] {
				v.add(mx, "no final state: %s was delivered (%s) but has no final state", rk, leases[rk][0].claim)
			}
			continue
		}
		for _, f := range fs {
			switch {
			case f.State == Acked && f.DeadLetters != 0:
				v.add(mx, "acked and dead-lettered: %s: %s", rk, f)
			case f.State == Acked && len(deadNack) > 0:
				v.add(mx, "acked after a permanent nack succeeded: %s: %s after %s", rk, f, deadNack[0])
			case f.State == DeadLettered && f.DeadLetters != 1:
				v.add(mx, "dead-lettered %d times: %s: %s", f.DeadLetters, rk, f)
			case f.State == DeadLettered && len(acked) > 0:
				v.add(mx, "acked and dead-lettered: %s: %s after %s", rk, f, acked[0])
			case f.State != Acked && f.State != DeadLettered:
				v.add(mx, "never finished: %s: %s", rk, f)
			}
		}
	}
	v.Note = fmt.Sprintf("deliveries of %d records", len(leases))
	return v
}
