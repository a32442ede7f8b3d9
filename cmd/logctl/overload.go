package main

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/logd-dev/logd/client"
)

// optionalDuration is a duration flag that tells "not given" from any
// value, 0 included: --max-overload-wait 0 fails fast, while leaving it
// out keeps --max-retry-time's bounds.
type optionalDuration struct {
	d   time.Duration
	set bool
}

func (o *optionalDuration) String() string {
	if !o.set {
		return ""
	}
	return o.d.String()
}

func (o *optionalDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	o.d, o.set = d, true
	return nil
}

func (o *optionalDuration) Type() string { return "duration" }

// overloadRetry sets p's bounds on refusals for overload from
// --max-overload-wait: not given, they are retried within
// --max-retry-time like any retryable failure; 0 fails at once; a
// positive wait retries them within it, whatever --max-retry-time says.
func overloadRetry(p *client.RetryPolicy, wait optionalDuration) error {
	switch {
	case !wait.set:
	case wait.d < 0:
		return usagef("--max-overload-wait %v is negative", wait.d)
	case wait.d == 0:
		p.FailOverloaded = true
	default:
		p.MaxOverloadWait = wait.d
	}
	return nil
}

// overloadWaitInterval is how often the wait's line is redrawn.
const overloadWaitInterval = 250 * time.Millisecond

// overloadWaits follows a command's waits on an overloaded server. It
// counts them for the final error's message (overloadHint) and, on a
// terminal, shows the current one on stderr as a single line redrawn in
// place (attempt, waited so far, next retry in) and erased when the wait
// ends, so that the command's own output never lands after it. Its
// methods are safe for concurrent use (bench calls from many
// goroutines), and do nothing on a nil *overloadWaits; Close joins the
// drawing goroutine.
type overloadWaits struct {
	w        io.Writer
	now      func() time.Time
	interval time.Duration

	mu sync.Mutex
	// Guarded by mu:
	tty     bool              // draw the line: on a terminal, unless -v prints the retries
	retries int               // overload retries so far
	waited  time.Duration     // sum of their waits
	cur     client.RetryEvent // the latest overload retry
	at      time.Time         // when cur's wait began, on now's clock
	shown   bool              // a line is on the terminal
	started bool              // the drawing goroutine runs (or ran)
	closed  bool

	poke chan struct{} // wakes the drawing goroutine for a new wait
	stop chan struct{}
	wg   sync.WaitGroup
}

// newOverloadWaits returns a follower of waits that draws on w when tty.
func newOverloadWaits(w io.Writer, tty bool) *overloadWaits {
	return &overloadWaits{w: w, tty: tty, now: time.Now, interval: overloadWaitInterval,
		poke: make(chan struct{}, 1), stop: make(chan struct{})}
}

// retry records a retry about to wait; it ignores retries after other
// failures than overload.
func (s *overloadWaits) retry(e client.RetryEvent) {
	if s == nil || !errors.Is(e.Err, client.ErrOverloaded) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retries++
	s.waited += e.Delay
	s.cur, s.at = e, s.now()
	if !s.tty || s.closed {
		return
	}
	s.drawLocked()
	if !s.started {
		s.started = true
		s.wg.Add(1)
		go s.run()
	}
	select {
	case s.poke <- struct{}{}:
	default: // a poke is pending already
	}
}

// run redraws the line until its wait ends, then erases it, and sleeps
// until the next wait.
func (s *overloadWaits) run() {
	defer s.wg.Done()
	t := time.NewTimer(s.interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.poke:
			// A new wait, which retry drew: the next frame is due an
			// interval on, or at its end.
			s.mu.Lock()
			left := s.cur.Delay - s.now().Sub(s.at)
			s.mu.Unlock()
			t.Reset(max(0, min(s.interval, left)))
		case <-t.C:
			s.mu.Lock()
			next := s.drawLocked()
			s.mu.Unlock()
			t.Reset(next)
		}
	}
}

// drawLocked draws the current wait's line, or erases it once the wait
// is over, and returns when to draw next. Call with mu held.
func (s *overloadWaits) drawLocked() time.Duration {
	elapsed := s.now().Sub(s.at)
	left := s.cur.Delay - elapsed
	if left <= 0 {
		s.eraseLocked()
		return time.Hour // until a poke
	}
	fmt.Fprintf(s.w, "\rlogctl: server overloaded%s; attempt %d refused, waited %v, next attempt in %v\x1b[K",
		retryAfterText(s.cur.Err), s.cur.Attempt, roundWait(s.cur.Elapsed+elapsed), roundWait(left))
	s.shown = true
	return min(s.interval, left)
}

// eraseLocked erases the line if one is shown. Call with mu held.
func (s *overloadWaits) eraseLocked() {
	if s.shown {
		io.WriteString(s.w, "\r\x1b[K")
		s.shown = false
	}
}

// quiet stops drawing, and erases the line if one is shown: -v prints
// each retry on a line of its own, and a progress report tells of the
// wait in its own line (note).
func (s *overloadWaits) quiet() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eraseLocked()
	s.tty = false
}

// note is the end of a progress report during a wait: "  (server
// overloaded: retry after 1s; next attempt in 800ms)", or "" when no wait
// is under way.
func (s *overloadWaits) note() string {
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retries == 0 {
		return ""
	}
	left := s.cur.Delay - s.now().Sub(s.at)
	if left <= 0 {
		return ""
	}
	return fmt.Sprintf("  (server overloaded%s; next attempt in %v)", retryAfterText(s.cur.Err), roundWait(left))
}

// newProgress is a progress report on stderr (newProgress) that tells of
// waits on an overloaded server: the report owns the terminal's line, so
// the wait's own line is not drawn beside it.
func (o *globalOpts) newProgress(enabled bool, total int64, label string) *progress {
	p := newProgress(o.stderr, enabled, total, label)
	if p != nil {
		o.overload.quiet()
		p.note = o.overload.note
	}
	return p
}

// erase erases the line if one is shown, before other output.
func (s *overloadWaits) erase() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eraseLocked()
}

// Close stops drawing and erases the line; nothing is drawn after it.
// Closing again does nothing more.
func (s *overloadWaits) Close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	wasClosed := s.closed
	s.closed = true
	started := s.started
	s.mu.Unlock()
	if started && !wasClosed {
		close(s.stop)
		s.wg.Wait()
	}
	s.erase()
}

// waits returns the overload retries so far and the time they waited.
func (s *overloadWaits) waits() (int, time.Duration) {
	if s == nil {
		return 0, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.retries, s.waited
}

// roundWait rounds a wait for display: to 100ms, so that 1.2s reads as
// such and a redrawn line does not flicker through milliseconds.
func roundWait(d time.Duration) time.Duration {
	if d < 100*time.Millisecond && d > 0 {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}

// retryAfterText is ": retry after 1.2s" for a refusal for overload that
// carries the server's retry-after, else "".
func retryAfterText(err error) string {
	var oe *client.OverloadedError
	if errors.As(err, &oe) && oe.RetryAfter > 0 {
		return ": retry after " + roundWait(oe.RetryAfter).String()
	}
	return ""
}

// overloadHint is the end of the error line of a command that failed on
// an overloaded server: the server's retry-after, how long logctl waited,
// and the flag that bounds the wait (unless the command asked to fail at
// once).
func (o *globalOpts) overloadHint(err error) string {
	hint := " (not applied: server overloaded" + retryAfterText(err)
	retries, waited := o.overload.waits()
	if retries > 0 {
		noun := "retries"
		if retries == 1 {
			noun = "retry"
		}
		hint += fmt.Sprintf("; logctl waited %v over %d %s", roundWait(waited), retries, noun)
	}
	if !o.maxOverloadWait.set || o.maxOverloadWait.d > 0 {
		hint += "; --max-overload-wait sets how long logctl waits"
	}
	return hint + ")"
}

// eraseFirst is logctl's stdout when stderr is a terminal: each write
// first erases an overload wait's line, so that the command's output does
// not continue it.
type eraseFirst struct {
	w io.Writer
	s *overloadWaits
}

func (e eraseFirst) Write(p []byte) (int, error) {
	e.s.erase()
	return e.w.Write(p)
}
