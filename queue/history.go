package queue

import (
	"slices"
	"sort"
)

// Attempt history: each delivery of an unfinished record, and how it
// ended, kept while the group keeps the state of feature level 6 (the
// same switch as exact bytes, SetExactBytes), handed to the dead-letter
// record (DeadLetter.History) and dropped when the record is finished.
//
// Bounds: the last MaxAttempts attempts per record (older ones are counted
// in HistoryDropped), an error text of at most MaxAttemptErrorBytes (cut,
// and marked), and HistoryBudget bytes of error text per group: past it,
// the error texts of the group's oldest attempts are dropped first (each
// marked), down to seven eighths of the budget so the work is amortized.

// History bounds.
const (
	// MaxAttempts is how many attempts a record's history keeps.
	MaxAttempts = 10
	// MaxAttemptErrorBytes bounds one attempt's error text.
	MaxAttemptErrorBytes = 1024
	// HistoryBudget bounds the error text bytes a group's histories hold.
	HistoryBudget = 8 << 20
)

// Outcomes of an attempt. The last three are not deliveries: a claim found
// the record undeliverable and decided it for the dead-letter topic.
const (
	OutcomeAcked            = "acked"
	OutcomeNacked           = "nacked"
	OutcomeRejected         = "rejected"
	OutcomeLeaseExpired     = "lease_expired"
	OutcomeDeadlineExceeded = ReasonDeadlineExceeded
	OutcomeExpired          = ReasonExpired
	OutcomeInvalidDeadline  = ReasonInvalidDeadline
)

// Attempt is one delivery of a record (or a claim's decision not to
// deliver it). Exported fields are its snapshot form.
type Attempt struct {
	// Delivery is the delivery's number (for a decision not to deliver,
	// the number of deliveries before it); Claimed the claim's time.
	Delivery uint32 `json:"d"`
	Claimed  int64  `json:"c"`
	// Worker is the worker id the claim named.
	Worker string `json:"w,omitempty"`
	// LeaseUntil is the lease deadline as last set, Extends how often
	// the lease was extended (0 for a decision).
	LeaseUntil int64  `json:"u,omitempty"`
	Extends    uint32 `json:"x,omitempty"`
	// Ended is when the attempt ended (the nack, the lease's end, the
	// decision); 0 while it runs. Outcome is how, "" while it runs.
	Ended   int64  `json:"e,omitempty"`
	Outcome string `json:"o,omitempty"`
	// Error is the nack's error text, at most MaxAttemptErrorBytes;
	// ErrorCut marks a text that was cut, ErrorDropped one dropped for the
	// group's HistoryBudget.
	Error        string `json:"m,omitempty"`
	ErrorCut     bool   `json:"mc,omitempty"`
	ErrorDropped bool   `json:"md,omitempty"`
}

// startAttempt records a delivery.
func (q *Group) startAttempt(r *leaseRecord, now int64, worker string) {
	if !q.exact {
		return
	}
	q.addAttempt(r, Attempt{Delivery: r.Deliveries, Claimed: now, Worker: worker, LeaseUntil: r.Until})
}

// addAttempt appends an attempt, keeping the last MaxAttempts.
func (q *Group) addAttempt(r *leaseRecord, a Attempt) {
	if len(r.History) >= MaxAttempts {
		q.historyBytes -= int64(len(r.History[0].Error))
		r.History = slices.Delete(r.History, 0, 1)
		r.HistoryDropped++
	}
	if len(r.History) == cap(r.History) {
		// Grow by doubling up to MaxAttempts, not past it.
		grown := make([]Attempt, len(r.History), min(max(2*cap(r.History), 1), MaxAttempts))
		copy(grown, r.History)
		r.History = grown
	}
	r.History = append(r.History, a)
}

// endAttempt closes the running attempt of r (the last one) with an
// outcome, or, when none runs, records a decision not to deliver it.
func (q *Group) endAttempt(r *leaseRecord, now int64, outcome, errText string) {
	if !q.exact {
		return
	}
	n := len(r.History)
	if n == 0 || r.History[n-1].Outcome != "" || outcome == OutcomeDeadlineExceeded || outcome == OutcomeExpired || outcome == OutcomeInvalidDeadline {
		q.addAttempt(r, Attempt{Delivery: r.Deliveries, Claimed: now})
		n = len(r.History)
	}
	a := &r.History[n-1]
	a.Ended, a.Outcome = now, outcome
	if len(errText) > MaxAttemptErrorBytes {
		errText, a.ErrorCut = errText[:MaxAttemptErrorBytes], true
	}
	a.Error = errText
	q.historyBytes += int64(len(errText))
	if q.historyBytes > q.budget() {
		q.trimHistory()
	}
}

// extendAttempt notes an extend of the running attempt.
func (q *Group) extendAttempt(r *leaseRecord) {
	if n := len(r.History); n > 0 && r.History[n-1].Outcome == "" {
		r.History[n-1].Extends++
		r.History[n-1].LeaseUntil = r.Until
	}
}

// budget is the group's history budget: HistoryBudget unless a test set
// its own.
func (q *Group) budget() int64 {
	if q.historyBudget > 0 {
		return q.historyBudget
	}
	return HistoryBudget
}

// dropHistory forgets a finished record's history.
func (q *Group) dropHistory(r *leaseRecord) {
	for _, a := range r.History {
		q.historyBytes -= int64(len(a.Error))
	}
	r.History, r.HistoryDropped = nil, 0
}

// trimHistory drops the error texts of the group's oldest attempts (by
// claim time, then partition, offset and delivery) until the texts fill at
// most seven eighths of HistoryBudget.
func (q *Group) trimHistory() {
	type ref struct {
		a         *Attempt
		part      int
		off       int64
		claimedAt int64
	}
	var all []ref
	for pi, p := range q.parts {
		for _, r := range p.Tracked {
			for i := range r.History {
				if a := &r.History[i]; a.Error != "" {
					all = append(all, ref{a: a, part: pi, off: r.Offset, claimedAt: a.Claimed})
				}
			}
		}
	}
	sort.Slice(all, func(i, j int) bool {
		x, y := all[i], all[j]
		if x.claimedAt != y.claimedAt {
			return x.claimedAt < y.claimedAt
		}
		if x.part != y.part {
			return x.part < y.part
		}
		if x.off != y.off {
			return x.off < y.off
		}
		return x.a.Delivery < y.a.Delivery
	})
	for _, x := range all {
		if q.historyBytes <= q.budget()/8*7 {
			return
		}
		q.historyBytes -= int64(len(x.a.Error))
		x.a.Error, x.a.ErrorDropped = "", true
	}
}
