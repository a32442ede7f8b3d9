package histcheck

import (
	"fmt"
	"sync"
	"time"
)

// Recorder collects the calls of a run. It is safe for concurrent use:
// each client goroutine calls Begin before a call and ends the returned
// Call once it knows the outcome.
type Recorder struct {
	start time.Time // the run's start, with a monotonic reading

	mu  sync.Mutex
	ops []Op // guarded by mu; ops[i].ID == i
}

// NewRecorder returns an empty recorder whose clock starts now.
func NewRecorder() *Recorder {
	return &Recorder{start: time.Now()}
}

// Start is the wall-clock time of the history's zero.
func (r *Recorder) Start() time.Time { return r.start }

// Now is the history's clock: monotonic nanoseconds since the recorder
// was made.
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// At converts a wall-clock time (a lease deadline a server reported) to
// the history's clock. A server's clock and this process's may differ;
// the queue checker allows for that with QueueOptions.ClockSlack.
func (r *Recorder) At(t time.Time) int64 { return int64(t.Sub(r.start)) }

// Begin records the start of a call described by op (its inputs: Kind,
// Client, Node, Leader and the kind's fields). It sets op's ID and Call
// and returns the call, to be ended once with OK, Fail or Unknown. A call
// never ended stays Pending, which the checkers treat as Unknown.
func (r *Recorder) Begin(op Op) *Call {
	op.Call = r.Now()
	op.Return = 0
	op.Outcome = Pending
	r.mu.Lock()
	defer r.mu.Unlock()
	op.ID = len(r.ops)
	r.ops = append(r.ops, op)
	return &Call{r: r, id: op.ID}
}

// Add records a call whose start and end the caller timed itself (for
// example a final scan). It sets op's ID and returns it.
func (r *Recorder) Add(op Op) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	op.ID = len(r.ops)
	r.ops = append(r.ops, op)
	return op.ID
}

// Ops returns a copy of the calls recorded so far, by ID. Slices inside
// an Op (Records, Deliveries, Assigned) are shared: do not change them
// after ending a call.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// Call is a call in flight, returned by Recorder.Begin.
type Call struct {
	r  *Recorder
	id int
}

// ID is the call's ID in the history.
func (c *Call) ID() int { return c.id }

// OK ends the call as a success; set, if not nil, fills in the outputs
// (an append's Offset, a read's Value and End, a claim's Deliveries...).
func (c *Call) OK(set func(op *Op)) { c.end(OK, "", nil, set) }

// Fail ends the call as a definite failure: the server guarantees it
// changed nothing. reason is Fenced or Stale where it applies, else "".
func (c *Call) Fail(reason Reason, err error) { c.end(Failed, reason, err, nil) }

// Unknown ends the call without knowing whether it took effect.
func (c *Call) Unknown(err error) { c.end(Unknown, "", err, nil) }

// end records the outcome once; a second end of the same call is a bug in
// the workload and panics, since it would rewrite history.
func (c *Call) end(o Outcome, reason Reason, err error, set func(*Op)) {
	now := c.r.Now()
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	op := &c.r.ops[c.id]
	if op.Outcome != Pending {
		panic(fmt.Sprintf("histcheck: call %d ended twice (%s, then %s)", c.id, op.Outcome, o))
	}
	op.Return = now
	op.Outcome = o
	op.Reason = reason
	if err != nil {
		op.Err = err.Error()
	}
	if set != nil {
		set(op)
	}
}
