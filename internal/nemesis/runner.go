package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Processes is what the runner does to the real nodes, by index. The
// test's harness implements it over its logd processes.
type Processes interface {
	// Leader returns the node that leads now, if any answers so.
	Leader(ctx context.Context) (int, bool)
	// Kill SIGKILLs a node; Restart starts it again on its data.
	Kill(i int) error
	Restart(i int) error
	// Pause SIGSTOPs a node; Resume SIGCONTs it.
	Pause(i int) error
	Resume(i int) error
	// KillAll SIGKILLs the nodes at once: every one is signalled before
	// any is reaped, so none runs on after another died.
	KillAll(nodes []int) error
	// RestartEnv starts a killed node again on its data, with env
	// (KEY=VALUE) added to its environment.
	RestartEnv(i int, env []string) error
	// Exited reports whether a node's process ended on its own (a crash
	// at a failpoint) since it was last started.
	Exited(i int) bool
	// Lead waits until node i is ready and hands it the leadership (a
	// leadership transfer), within ctx.
	Lead(ctx context.Context, i int) error
}

// Members changes the cluster's membership, for Membership faults. The
// test implements it, and records each change in its history.
type Members interface {
	// Remove removes node i from the cluster, through the others. nil
	// means the cluster no longer lists i, whatever the calls answered.
	Remove(ctx context.Context, i int) error
	// Rejoin stops node i if it runs, starts it with fresh data under the
	// same id, asks a member to add it, and waits until it is a voter.
	Rejoin(ctx context.Context, i int) error
}

// Event is one fault applied or healed, at a time from the run's start.
type Event struct {
	At   time.Duration
	What string
}

func (e Event) String() string { return fmt.Sprintf("t+%dms %s", e.At.Milliseconds(), e.What) }

// Runner applies a schedule's faults to processes and the network, one at
// a time, and heals each when its time is up. It logs every fault and
// heal, with its time, through Logf, and keeps them for the report.
type Runner struct {
	// Procs are the nodes. Required.
	Procs Processes
	// Net are the proxies between the nodes; required by network faults.
	Net *Net
	// Members changes the membership; required by Membership faults.
	Members Members
	// Moves starts and lists replica moves; required by KillMidMove
	// faults.
	Moves Moves
	// MoveWait bounds how long a KillMidMove fault waits, after its
	// drain, for a move in flight with a node of its role; seeing none,
	// it kills nothing. 0: DefaultMoveWait.
	MoveWait time.Duration
	// Logf receives one line per event (a test's t.Logf); nil: none.
	Logf func(format string, args ...any)

	mu sync.Mutex
	// start, events, killed, paused, faulty, removed, drained, midMoves
	// and hits are guarded by mu. faulty nodes run with a fault's
	// environment; removed ones are out of the cluster, to be added back;
	// drained ones are being drained, to be undone. midMoves counts the
	// KillMidMove faults applied, hits those whose kill met a move in
	// flight.
	start          time.Time
	events         []Event
	killed         map[int]bool
	paused         map[int]bool
	faulty         map[int]bool
	removed        map[int]bool
	drained        map[int]bool
	midMoves, hits int
}

// MovesHit returns how many KillMidMove faults were applied, and how many
// of them killed a node while a move was in flight: one seen in flight
// just before the kill, its mark still there after it. The others saw no
// move in flight within MoveWait, or saw theirs finish before the kill.
func (r *Runner) MovesHit() (hit, faults int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits, r.midMoves
}

// Events returns the events so far.
func (r *Runner) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func (r *Runner) record(format string, args ...any) {
	r.mu.Lock()
	e := Event{At: time.Since(r.start), What: fmt.Sprintf(format, args...)}
	r.events = append(r.events, e)
	r.mu.Unlock()
	if r.Logf != nil {
		r.Logf("nemesis %s", e)
	}
}

// Run applies s from now: each step at its time from start (at once if
// late), healed after its duration. It returns when the schedule is done
// or ctx ends, with everything healed: every paused node resumed, every
// killed node restarted, every link open. start is the run's time zero,
// shared with the workload's history.
func (r *Runner) Run(ctx context.Context, start time.Time, s Schedule) error {
	r.mu.Lock()
	r.start = start
	r.killed, r.paused, r.faulty, r.removed = map[int]bool{}, map[int]bool{}, map[int]bool{}, map[int]bool{}
	r.drained, r.midMoves, r.hits = map[int]bool{}, 0, 0
	r.mu.Unlock()
	for _, k := range s.Steps {
		if k.Kind.NeedsNet() && r.Net == nil {
			return fmt.Errorf("nemesis: fault %s needs the proxies, and the runner has none", k.Kind)
		}
		if k.Kind == Membership && r.Members == nil {
			return fmt.Errorf("nemesis: fault %s needs Members, and the runner has none", k.Kind)
		}
		if k.Kind.NeedsMoves() && r.Moves == nil {
			return fmt.Errorf("nemesis: fault %s needs Moves, and the runner has none", k.Kind)
		}
	}
	var errs []error
	for _, st := range s.Steps {
		if !sleepUntil(ctx, start.Add(st.At)) {
			break
		}
		heal, err := r.apply(ctx, st)
		if err != nil {
			errs = append(errs, fmt.Errorf("apply %s: %w", st.Kind, err))
		}
		sleepUntil(ctx, time.Now().Add(st.For))
		if heal != nil {
			if err := heal(); err != nil {
				errs = append(errs, fmt.Errorf("heal %s: %w", st.Kind, err))
			}
		}
	}
	if err := r.HealAll(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// HealAll resumes every paused node, restarts every killed one, restarts
// without its fault every node that runs with one, adds back every
// removed node, opens every link, and then undoes every drain.
func (r *Runner) HealAll() error {
	r.mu.Lock()
	paused, killed := sortedKeys(r.paused), sortedKeys(r.killed)
	faulty, removed := sortedKeys(r.faulty), sortedKeys(r.removed)
	drained := sortedKeys(r.drained)
	r.mu.Unlock()
	var errs []error
	if r.Net != nil {
		r.Net.Heal()
	}
	if len(paused) > 0 {
		errs = append(errs, r.resume(paused))
	}
	for _, i := range faulty {
		errs = append(errs, r.restartClean(i))
	}
	for _, i := range removed {
		errs = append(errs, r.rejoin(i))
	}
	if len(killed) > 0 {
		errs = append(errs, r.restart(killed))
	}
	for _, i := range drained {
		errs = append(errs, r.undrain(i))
	}
	return errors.Join(errs...)
}

func sortedKeys(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// sleepUntil waits until t; false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// leader returns the leader, or Order[0] when no node leads.
func (r *Runner) leader(ctx context.Context, f Fault) (int, string) {
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if l, ok := r.Procs.Leader(lctx); ok {
		return l, fmt.Sprintf("leader n%d", l+1)
	}
	return f.Order[0], fmt.Sprintf("n%d (no leader)", f.Order[0]+1)
}

// apply starts one fault and returns how to heal it.
func (r *Runner) apply(ctx context.Context, st Step) (heal func() error, err error) {
	n := len(st.Order)
	minority := (n - 1) / 2
	switch st.Kind {
	case KillLeader, PauseLeader:
		l, who := r.leader(ctx, st.Fault)
		if st.Kind == KillLeader {
			return r.kill(st.Kind, []int{l}, who)
		}
		return r.pause(st.Kind, []int{l}, who)
	case KillRandom:
		return r.kill(st.Kind, st.Order[:1], "")
	case KillMajority:
		return r.kill(st.Kind, st.Order[:n/2+1], "")
	case PauseMinority:
		return r.pause(st.Kind, st.Order[:max(minority, 1)], "")
	case IsolateLeader:
		l, who := r.leader(ctx, st.Fault)
		var others []int
		for i := range n {
			if i != l {
				others = append(others, i)
			}
		}
		return r.cut(st, []int{l}, others, who+" isolated")
	case Split:
		small := st.Order[:max(minority, 1)]
		return r.cut(st, small, st.Order[len(small):], "minority/majority")
	case Bridge:
		rest := st.Order[1:]
		a, b := rest[:len(rest)/2], rest[len(rest)/2:]
		return r.cut(st, a, b, fmt.Sprintf("bridge n%d", st.Order[0]+1))
	case OneWay:
		from, who := st.Order[0], fmt.Sprintf("n%d", st.Order[0]+1)
		if st.Leader {
			from, who = r.leader(ctx, st.Fault)
		}
		var to []int
		for _, j := range st.Order {
			if j != from {
				to = append(to, j)
			}
		}
		if !st.All {
			to = to[:1]
		}
		for _, j := range to {
			r.Net.Set(from, j, st.Link)
		}
		r.record("%s: %s -> %s %v", st.Kind, who, names(to), st.Link)
		return func() error {
			for _, j := range to {
				r.Net.Set(from, j, Link{})
			}
			r.record("heal %s: %s -> %s open", st.Kind, who, names(to))
			return nil
		}, nil
	case Slow:
		for i := range n {
			for j := range n {
				if i != j {
					r.Net.Set(i, j, st.Link)
				}
			}
		}
		r.record("%s: every link %v", st.Kind, st.Link)
		return func() error {
			r.Net.Heal()
			r.record("heal %s: every link open", st.Kind)
			return nil
		}, nil
	case PowerCutAll:
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		err := r.Procs.KillAll(all)
		r.mu.Lock()
		for _, i := range all {
			r.killed[i] = true
		}
		r.mu.Unlock()
		r.record("%s: kill -9 %s at once", st.Kind, names(all))
		return func() error { return r.restart(all) }, err
	case CrashFailpoint, ClockOffset:
		return r.restartWith(ctx, st, st.Order[0], "")
	case SlowDisk:
		i, who := st.Order[0], ""
		if st.Leader {
			i, who = r.leader(ctx, st.Fault)
		}
		return r.restartWith(ctx, st, i, who)
	case Membership:
		return r.membership(ctx, st)
	case KillMidMove:
		return r.killMidMove(ctx, st)
	}
	return nil, fmt.Errorf("nemesis: unknown fault kind %q", st.Kind)
}

// restartWith kills node i and starts it again with the fault's
// environment (a ClockOffset with Leader then hands it the leadership);
// the heal kills it (a crashed one is gone already) and starts it
// without.
func (r *Runner) restartWith(ctx context.Context, st Step, i int, who string) (func() error, error) {
	env := st.Env()
	var errs []error
	if err := r.Procs.Kill(i); err != nil {
		errs = append(errs, fmt.Errorf("kill n%d: %w", i+1, err))
	}
	if err := r.Procs.RestartEnv(i, env); err != nil {
		errs = append(errs, fmt.Errorf("restart n%d with %v: %w", i+1, env, err))
	}
	r.mu.Lock()
	r.faulty[i] = true
	r.mu.Unlock()
	r.record("%s: kill -9 n%d, restart with %v%s", st.Kind, i+1, env, paren(who))
	if st.Kind == ClockOffset && st.Leader {
		// A follower's clock stamps nothing: the leader stamps commands.
		lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		if err := r.Procs.Lead(lctx, i); err != nil {
			r.record("%s: n%d did not take the leadership: %v", st.Kind, i+1, err)
		} else {
			r.record("%s: n%d leads", st.Kind, i+1)
		}
		cancel()
	}
	return func() error {
		if st.Kind == CrashFailpoint {
			if r.Procs.Exited(i) {
				r.record("%s: n%d crashed at %s (%s)", st.Kind, i+1, st.Point, st.Term)
			} else {
				r.record("%s: n%d did not crash at %s (%s) within %v", st.Kind, i+1, st.Point, st.Term, st.For.Round(time.Millisecond))
			}
		}
		return r.restartClean(i)
	}, errors.Join(errs...)
}

// restartClean kills a node that runs with a fault's environment and
// starts it without.
func (r *Runner) restartClean(i int) error {
	r.mu.Lock()
	was := r.faulty[i]
	delete(r.faulty, i)
	r.mu.Unlock()
	if !was {
		return nil
	}
	var errs []error
	if err := r.Procs.Kill(i); err != nil {
		errs = append(errs, fmt.Errorf("kill n%d: %w", i+1, err))
	}
	if err := r.Procs.Restart(i); err != nil {
		errs = append(errs, fmt.Errorf("restart n%d: %w", i+1, err))
	}
	r.record("kill -9 n%d, restart without the fault", i+1)
	return errors.Join(errs...)
}

// membership removes a follower (killed first when the fault is Dead);
// the heal adds it back with fresh data. A removal that cannot be
// confirmed is healed by restarting the node on its data instead.
func (r *Runner) membership(ctx context.Context, st Step) (func() error, error) {
	l, _ := r.leader(ctx, st.Fault)
	x := st.Order[0]
	for _, i := range st.Order {
		if i != l {
			x = i
			break
		}
	}
	if st.Dead {
		if _, err := r.kill(st.Kind, []int{x}, "to be removed"); err != nil {
			return func() error { return r.restart([]int{x}) }, err
		}
	}
	if err := r.Members.Remove(ctx, x); err != nil {
		r.record("%s: removal of n%d not confirmed: %v", st.Kind, x+1, err)
		return func() error { return r.restart([]int{x}) }, fmt.Errorf("remove n%d: %w", x+1, err)
	}
	r.mu.Lock()
	r.removed[x] = true
	r.mu.Unlock()
	state := "still running"
	if st.Dead {
		state = "dead"
	}
	r.record("%s: n%d removed (%s)", st.Kind, x+1, state)
	return func() error { return r.rejoin(x) }, nil
}

// rejoin adds a removed node back with fresh data.
func (r *Runner) rejoin(i int) error {
	r.mu.Lock()
	was := r.removed[i]
	delete(r.removed, i)
	delete(r.killed, i) // Rejoin starts it
	r.mu.Unlock()
	if !was {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := r.Members.Rejoin(ctx, i); err != nil {
		r.record("rejoin n%d failed: %v", i+1, err)
		return fmt.Errorf("rejoin n%d: %w", i+1, err)
	}
	r.record("n%d added back with fresh data, a voter", i+1)
	return nil
}

// paren is " (s)", or "" for an empty s.
func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

func names(nodes []int) string {
	out := "["
	for i, n := range nodes {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("n%d", n+1)
	}
	return out + "]"
}

func (r *Runner) kill(k Kind, nodes []int, who string) (func() error, error) {
	var errs []error
	for _, i := range nodes {
		if err := r.Procs.Kill(i); err != nil {
			errs = append(errs, fmt.Errorf("kill n%d: %w", i+1, err))
			continue
		}
		r.mu.Lock()
		r.killed[i] = true
		r.mu.Unlock()
	}
	r.record("%s: kill -9 %s%s", k, names(nodes), paren(who))
	return func() error { return r.restart(nodes) }, errors.Join(errs...)
}

func (r *Runner) restart(nodes []int) error {
	var errs []error
	for _, i := range nodes {
		r.mu.Lock()
		was := r.killed[i]
		delete(r.killed, i)
		r.mu.Unlock()
		if !was {
			continue
		}
		if err := r.Procs.Restart(i); err != nil {
			errs = append(errs, fmt.Errorf("restart n%d: %w", i+1, err))
		}
	}
	r.record("restart %s", names(nodes))
	return errors.Join(errs...)
}

func (r *Runner) pause(k Kind, nodes []int, who string) (func() error, error) {
	var errs []error
	for _, i := range nodes {
		if err := r.Procs.Pause(i); err != nil {
			errs = append(errs, fmt.Errorf("pause n%d: %w", i+1, err))
			continue
		}
		r.mu.Lock()
		r.paused[i] = true
		r.mu.Unlock()
	}
	r.record("%s: SIGSTOP %s%s", k, names(nodes), paren(who))
	return func() error { return r.resume(nodes) }, errors.Join(errs...)
}

func (r *Runner) resume(nodes []int) error {
	var errs []error
	for _, i := range nodes {
		r.mu.Lock()
		was := r.paused[i]
		delete(r.paused, i)
		r.mu.Unlock()
		if !was {
			continue
		}
		if err := r.Procs.Resume(i); err != nil {
			errs = append(errs, fmt.Errorf("resume n%d: %w", i+1, err))
		}
	}
	r.record("SIGCONT %s", names(nodes))
	return errors.Join(errs...)
}

// cut cuts a from b both ways, with the step's cut mode.
func (r *Runner) cut(st Step, a, b []int, what string) (func() error, error) {
	r.Net.Cut(st.Link.Cut, a, b)
	r.record("%s (%s): %s | %s cut (%v)", st.Kind, what, names(a), names(b), st.Link.Cut)
	return func() error {
		r.Net.Heal()
		r.record("heal %s: %s", st.Kind, what)
		return nil
	}, nil
}
