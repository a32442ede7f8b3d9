package histcheck

import (
	"fmt"
	"strings"
	"time"
)

// Verdict is one checker's finding over a history.
type Verdict struct {
	// Checker names the checker ("linearizable", "follower-reads", ...).
	Checker string
	// Checked counts what the checker looked at (calls, records,
	// partitions: each checker says which in Note).
	Checked int
	// Violations describe what broke, one line each, at most
	// Options.MaxViolations of them; More counts the rest.
	Violations []string
	More       int
	// Inconclusive lists what the checker could not decide (a
	// linearizability search that ran out of time). It does not fail the
	// verdict, but a run that wants evidence should look at it.
	Inconclusive []string
	// Note says what Checked counts, and anything else worth printing.
	Note string
}

// OK reports whether the checker found no violation.
func (v *Verdict) OK() bool { return len(v.Violations) == 0 && v.More == 0 }

// String renders the verdict for a test log: a summary line, then each
// violation indented.
func (v *Verdict) String() string {
	var b strings.Builder
	status := "ok"
	if !v.OK() {
		status = fmt.Sprintf("FAIL (%d violations)", len(v.Violations)+v.More)
	}
	fmt.Fprintf(&b, "%s: %s, %d checked", v.Checker, status, v.Checked)
	if v.Note != "" {
		fmt.Fprintf(&b, " (%s)", v.Note)
	}
	for _, s := range v.Violations {
		fmt.Fprintf(&b, "\n  %s", s)
	}
	if v.More > 0 {
		fmt.Fprintf(&b, "\n  ... and %d more", v.More)
	}
	for _, s := range v.Inconclusive {
		fmt.Fprintf(&b, "\n  inconclusive: %s", s)
	}
	return b.String()
}

// add records a violation, keeping at most max of them.
func (v *Verdict) add(max int, format string, args ...any) {
	if len(v.Violations) >= max {
		v.More++
		return
	}
	v.Violations = append(v.Violations, fmt.Sprintf(format, args...))
}

// Options tune the checkers. The zero value is ready to use.
type Options struct {
	// MaxViolations bounds the violations each verdict lists; 0 means 20.
	MaxViolations int
	// LinearizabilityTimeout bounds porcupine's search per partition; 0
	// means one minute. A search that runs out is Inconclusive.
	LinearizabilityTimeout time.Duration
	// VisualizeDir, if set, receives porcupine's HTML visualization of
	// each partition that is not linearizable
	// (linearizable-TOPIC-PARTITION.html).
	VisualizeDir string
	// ClockSlack is how far (ns) a server's clock may be from this
	// process's when comparing lease deadlines with call times; 0 means
	// none.
	ClockSlack int64
}

func (o Options) maxViolations() int {
	if o.MaxViolations <= 0 {
		return 20
	}
	return o.MaxViolations
}

func (o Options) timeout() time.Duration {
	if o.LinearizabilityTimeout <= 0 {
		return time.Minute
	}
	return o.LinearizabilityTimeout
}

// Report renders verdicts one after the other.
func Report(vs []Verdict) string {
	var parts []string
	for i := range vs {
		parts = append(parts, vs[i].String())
	}
	return strings.Join(parts, "\n")
}

// AllOK reports whether every verdict is OK.
func AllOK(vs []Verdict) bool {
	for i := range vs {
		if !vs[i].OK() {
			return false
		}
	}
	return true
}
