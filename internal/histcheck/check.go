package histcheck

// CheckAll runs every checker over a history, in a fixed order:
// linearizable, follower-reads, final-reads, idempotency, groups, queues,
// membership. A checker with nothing to check reports OK with Checked 0.
// A history that Validate refuses gets one failing verdict, "history",
// instead: the checkers assume valid calls.
func CheckAll(ops []Op, opt Options) []Verdict {
	if err := Validate(ops); err != nil {
		return []Verdict{{Checker: "history", Checked: len(ops), Violations: []string{err.Error()}}}
	}
	return []Verdict{
		CheckLinearizable(ops, opt),
		CheckFollowerReads(ops, opt),
		CheckFinalReads(ops, opt),
		CheckIdempotency(ops, opt),
		CheckGroups(ops, opt),
		CheckQueues(ops, opt),
		CheckMembership(ops, opt),
	}
}
