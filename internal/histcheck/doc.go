// Package histcheck holds client-observed histories of a logd run and the
// checkers over them, in the tradition of Jepsen and etcd's robustness
// tests (docs/faults.md). It does no I/O to logd: a workload records each
// call it makes through a Recorder, and after the run (faults stopped,
// cluster healed, final scans recorded) hands the history to the checkers.
//
// # Histories
//
// A history is a slice of Op, one per call: who called (Client), which node
// answered (Node), whether it was a leader call or a follower read
// (Leader), when it began and ended (Call, Return: monotonic nanoseconds
// since the run's start), and how it ended (Outcome):
//
//   - OK: it succeeded, and its outputs are set;
//   - Failed: the server guarantees nothing happened (Reason says why when
//     a checker cares: Fenced commits, Stale tokens);
//   - Unknown (or Pending, never ended): it may have happened at any time
//     after it began. Checkers treat its return time as Infinity and never
//     count it as lost.
//
// The Kind constants document which fields each kind of call uses. A
// client makes one call at a time; values the workload appends are unique
// (client id and counter) except the retries of one idempotency key, which
// resend the same value.
//
// Recording:
//
//	rec := histcheck.NewRecorder()
//	c := rec.Begin(histcheck.Op{Kind: histcheck.Append, Client: 3, Node: "n1",
//		Leader: true, Topic: "t", Partition: 0, Value: "c3-17"})
//	res, err := produce(...)
//	switch {
//	case err == nil:
//		c.OK(func(op *histcheck.Op) { op.Offset = res.Offset })
//	case definitelyNotWritten(err):
//		c.Fail("", err)
//	default:
//		c.Unknown(err)
//	}
//
// # Saving and re-checking
//
// Save writes a history as JSON lines (a header line, then one Op per
// line); Load reads it back, and the checkers give the same verdict on the
// loaded history as on the original. To re-check a saved history offline:
//
//	go test ./internal/histcheck -run TestRecheck -args -history FILE
//
// which prints every verdict and fails if one is not OK.
package histcheck
