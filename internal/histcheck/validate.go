package histcheck

import "fmt"

// maxTime bounds call and return times (about 146 years of nanoseconds),
// leaving room above for Infinity and the return the checkers give open
// calls.
const maxTime = 1 << 62

// Validate checks that every call is one a Recorder could have recorded:
// a known kind, outcome and reason, times in [0, 2^62), a return no earlier
// than the call once ended, no ID twice. It returns an *OpError wrapping ErrInvalid for
// the first call that is not.
func Validate(ops []Op) error {
	ids := make(map[int]bool, len(ops))
	for i := range ops {
		op := &ops[i]
		bad := func(format string, args ...any) error {
			return &OpError{ID: op.ID, Err: fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)}
		}
		switch op.Kind {
		case Append, Read, Scan, Join, Commit, FetchCommitted, Reset, Claim, Ack, Nack, Extend, QueueFinal, AddNode, RemoveNode:
		default:
			return bad("unknown kind %q", op.Kind)
		}
		switch op.Outcome {
		case Pending, OK, Failed, Unknown:
		default:
			return bad("unknown outcome %q", op.Outcome)
		}
		switch op.Reason {
		case "", Fenced, Stale:
		default:
			return bad("unknown reason %q", op.Reason)
		}
		if op.Call < 0 || op.Return >= maxTime || (op.Outcome != Pending && op.Return < op.Call) {
			return bad("returned at %d, called at %d", op.Return, op.Call)
		}
		if ids[op.ID] {
			return bad("ID used twice")
		}
		ids[op.ID] = true
	}
	return nil
}
