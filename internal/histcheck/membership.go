package histcheck

import "fmt"

// acknowledging reports whether an ok answer of kind k acknowledges a
// change, which a removed node must never give. Reads are left out: a
// removed node's reads are stale reads, for the read checkers.
func acknowledging(k Kind) bool {
	switch k {
	case Append, Commit, Reset, Join, Claim, Ack, Nack, Extend, AddNode, RemoveNode:
		return true
	}
	return false
}

// CheckMembership checks that a removed node acknowledges nothing: no ok
// call of an acknowledging kind (appends, group and queue calls,
// membership changes) answered by node N lies wholly between the return
// of an ok removal of N and the call of a later add of N (any add not
// failed, since it may have brought N back).
func CheckMembership(ops []Op, opt Options) Verdict {
	v := Verdict{Checker: "membership"}
	mx := opt.maxViolations()
	type span struct {
		removal *Op
		until   int64 // the next add's call, or Infinity
	}
	removed := map[string][]span{}
	for i := range ops {
		op := &ops[i]
		if op.Kind != RemoveNode || op.Outcome != OK {
			continue
		}
		sp := span{removal: op, until: Infinity}
		for j := range ops {
			add := &ops[j]
			if add.Kind == AddNode && add.Target == op.Target && add.Outcome != Failed && add.Call > op.Return {
				sp.until = min(sp.until, add.Call)
			}
		}
		removed[op.Target] = append(removed[op.Target], sp)
		v.Checked++
	}
	if len(removed) == 0 {
		v.Note = "no removals"
		return v
	}
	for i := range ops {
		op := &ops[i]
		if op.Outcome != OK || !acknowledging(op.Kind) {
			continue
		}
		for _, sp := range removed[op.Node] {
			if op.Call > sp.removal.Return && op.Return < sp.until {
				v.add(mx, "removed node %s acknowledged %s after its removal %s", op.Node, op, sp.removal)
				break
			}
		}
	}
	v.Note = fmt.Sprintf("removals of %d nodes", len(removed))
	return v
}
