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
// The Kind constants document which fields each kind of call uses. What
// the checkers assume of a workload:
//
//   - a client makes one call at a time, and the attempts of one
//     idempotency key are made one at a time;
//   - appended values are unique (client id and counter), except the
//     retries of one idempotency key, which resend the same value;
//   - an append names its partition when it begins (produce to an
//     explicit partition, or compute the key's partition), so that an
//     unknown outcome still belongs to one partition's log; each
//     partition starts empty;
//   - a produce of several records is recorded as one Append per record
//     with the same times and outcome (the batch's atomicity is then not
//     checked, which is weaker but sound);
//   - an ok read reports End; a lease deadline is converted to history
//     time with Recorder.At;
//   - final scans (Scan) of every partition on every node are recorded
//     after healing; they read from offset 0.
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
// # Checkers
//
// Each checker returns a Verdict: its violations, one readable line each,
// at most Options.MaxViolations of them. CheckAll runs them all.
//
//   - CheckLinearizable: each partition's log, from appends and leader
//     reads, is linearizable (model: append returns the end offset, a
//     read of O returns the value at O or out-of-range when O >= end).
//     Where the final scans agree it first checks against them in one
//     pass, which names the two calls that contradict each other; then,
//     and without a scan, porcupine searches (its visualization of a
//     failing partition goes to Options.VisualizeDir). Porcupine is quick
//     on linearizable histories but may need long on long ones that are
//     not, hence the scans.
//   - CheckFollowerReads: follower reads never go back for one client on
//     one node, and no offset ever shows two values.
//   - CheckFinalReads: lost, duplicate, inconsistent, unexpected, gaps and
//     divergence between nodes, from the final scans.
//   - CheckIdempotency: no key at two offsets; every retry of an
//     acknowledged key answers the original offset.
//   - CheckGroups: committed offsets never go back except by a reset (bug
//     class: a new leader serving an older offset); no fenced commit
//     succeeds.
//   - CheckQueues: no two live leases on a record; no stale token
//     accepted; every record ends acked once or dead-lettered once;
//     delivery counts never go back. A Revocable delivery (a Kafka share
//     consumer's acquisition, which the server may release unasked)
//     counts as held only until its last ok ack, nack or extend began.
//   - CheckMembership: a removed node acknowledges nothing.
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
