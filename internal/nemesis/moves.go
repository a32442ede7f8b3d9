package nemesis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Moves starts and watches data group replica moves, for KillMidMove
// faults. The test implements it over the cluster's admin calls; its
// methods are called from the runner's goroutine, one at a time.
type Moves interface {
	// Drain starts (undo: ends) the drain of node i's data group
	// replicas, within ctx: the meta leader then moves them to the other
	// nodes. nil means the drain is (or, undone, is no longer) in the
	// table.
	Drain(ctx context.Context, i int, undo bool) error
	// Replicas counts the data group replicas the table places on each
	// node, by index (a move's target counts, its source no longer).
	Replicas(ctx context.Context) (map[int]int, error)
	// InFlight lists the replica moves the table marks as in progress.
	InFlight(ctx context.Context) ([]Move, error)
}

// Move is one data group's replica move in progress.
type Move struct {
	// Group is the data group's id.
	Group uint64
	// Added are the nodes the group gains, Removed those it loses.
	Added, Removed []int
	// Done: the group's voters are known to be its replicas already; the
	// move waits only for the meta leader to clear its mark.
	Done bool
}

func (m Move) String() string {
	s := fmt.Sprintf("group %d", m.Group)
	for _, i := range m.Added {
		s += fmt.Sprintf(" +n%d", i+1)
	}
	for _, i := range m.Removed {
		s += fmt.Sprintf(" -n%d", i+1)
	}
	if m.Done {
		s += " (done)"
	}
	return s
}

// DefaultMoveWait is Runner.MoveWait's default.
const DefaultMoveWait = 10 * time.Second

// The bounds of the calls a KillMidMove fault makes through Moves.
const (
	// drainTimeout bounds a drain or its undo, the harness's retries
	// included: a meta leader killed by the fault before has been
	// replaced by then.
	drainTimeout = 30 * time.Second
	// listTimeout bounds one Replicas or InFlight.
	listTimeout = 5 * time.Second
	// pollEvery is how often a fault looks for a move in flight: a move
	// of a small group lasts about a second.
	pollEvery = 50 * time.Millisecond
)

// killMidMove drains a node, waits up to MoveWait for a move in flight
// (not done) with a node of the step's role, and kills that node; the
// heal restarts it and undoes the drain. A fault that sees no such move
// kills nothing, and its heal only undoes the drain.
func (r *Runner) killMidMove(ctx context.Context, st Step) (func() error, error) {
	d, why := r.drainee(ctx, st)
	r.mu.Lock()
	r.midMoves++
	// Whatever the answer, the drain may be in the table: undo it.
	r.drained[d] = true
	r.mu.Unlock()
	undo := func() error { return r.undrain(d) }
	dctx, cancel := context.WithTimeout(ctx, drainTimeout)
	err := r.Moves.Drain(dctx, d, false)
	cancel()
	if err != nil {
		r.record("%s: drain n%d failed: %v", st.Kind, d+1, err)
		return undo, fmt.Errorf("drain n%d: %w", d+1, err)
	}
	r.record("%s: draining n%d (%s)", st.Kind, d+1, why)
	m, victim, who, err := r.awaitMove(ctx, st)
	if err != nil {
		r.record("%s: no move in flight with a %s within %v, nothing killed: %v", st.Kind, st.Role, r.moveWait(), err)
		return undo, nil
	}
	heal, kerr := r.kill(st.Kind, []int{victim}, who)
	// Seen in flight just before the kill and still marked after it: in
	// flight at the kill. A mark is cleared only at one of the meta
	// leader's passes after the move is done, and a new move of the group
	// marked at a later pass.
	switch ok, err := r.stillMarked(ctx, m.Group); {
	case ok:
		r.mu.Lock()
		r.hits++
		r.mu.Unlock()
		r.record("%s: group %d's move still marked after the kill", st.Kind, m.Group)
	case err != nil:
		r.record("%s: group %d's move not confirmed after the kill: %v", st.Kind, m.Group, err)
	default:
		r.record("%s: group %d's move no longer marked after the kill", st.Kind, m.Group)
	}
	return func() error { return errors.Join(heal(), undo()) }, kerr
}

// drainee is the node a KillMidMove fault drains: the first node of Order
// the table places replicas on (a node drained by an earlier fault may
// hold none yet), or Order[0] when none does or the table is not known.
// why says which.
func (r *Runner) drainee(ctx context.Context, st Step) (int, string) {
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	held, err := r.Moves.Replicas(lctx)
	cancel()
	if err != nil {
		return st.Order[0], fmt.Sprintf("replicas not known: %v", err)
	}
	for _, i := range st.Order {
		if held[i] > 0 {
			return i, fmt.Sprintf("holds %d replicas", held[i])
		}
	}
	return st.Order[0], "no node holds replicas"
}

func (r *Runner) moveWait() time.Duration { return cmp.Or(r.MoveWait, DefaultMoveWait) }

// awaitMove polls the moves in flight, for up to MoveWait, until one not
// done has a node of the step's role; it returns that move, the node and
// how to name it. The error says why none was found.
func (r *Runner) awaitMove(ctx context.Context, st Step) (m Move, victim int, who string, err error) {
	wctx, cancel := context.WithTimeout(ctx, r.moveWait())
	defer cancel()
	var last error
	for {
		m, victim, who, last = r.findMove(wctx, st)
		if last == nil {
			return m, victim, who, nil
		}
		if !sleepUntil(wctx, time.Now().Add(pollEvery)) {
			return Move{}, 0, "", last
		}
	}
}

// findMove lists the moves once and picks the node to kill: for
// RoleSource and RoleTarget, the first node of Order that a move not done
// removes or adds (with the move of the lowest group that does); for
// RoleMetaLeader, the meta leader, looked up before the list so that the
// kill follows it at once, with the lowest group's move it takes part in,
// or else the lowest group's.
func (r *Runner) findMove(ctx context.Context, st Step) (Move, int, string, error) {
	l := -1
	if st.Role == RoleMetaLeader {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		i, ok := r.Procs.Leader(lctx)
		cancel()
		if !ok {
			return Move{}, 0, "", errors.New("no meta leader")
		}
		l = i
	}
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	ms, err := r.Moves.InFlight(lctx)
	cancel()
	if err != nil {
		return Move{}, 0, "", err
	}
	all := ms
	ms = slices.DeleteFunc(slices.Clone(ms), func(m Move) bool { return m.Done })
	if len(ms) == 0 {
		return Move{}, 0, "", fmt.Errorf("no move in flight (marked: %v)", all)
	}
	slices.SortFunc(ms, func(a, b Move) int { return cmp.Compare(a.Group, b.Group) })
	if st.Role == RoleMetaLeader {
		for _, m := range ms {
			switch {
			case slices.Contains(m.Removed, l):
				return m, l, fmt.Sprintf("meta leader n%d, source of %v", l+1, m), nil
			case slices.Contains(m.Added, l):
				return m, l, fmt.Sprintf("meta leader n%d, target of %v", l+1, m), nil
			}
		}
		return ms[0], l, fmt.Sprintf("meta leader n%d, %v in flight", l+1, ms[0]), nil
	}
	for _, i := range st.Order {
		for _, m := range ms {
			nodes := m.Added
			if st.Role == RoleSource {
				nodes = m.Removed
			}
			if slices.Contains(nodes, i) {
				return m, i, fmt.Sprintf("%s of %v", st.Role, m), nil
			}
		}
	}
	return Move{}, 0, "", fmt.Errorf("moves in flight %v, none with a %s", ms, st.Role)
}

// stillMarked reports whether a move of group g is marked, done or not,
// asking again for a few seconds while the answer is an error (the node
// asked may be the one just killed).
func (r *Runner) stillMarked(ctx context.Context, g uint64) (bool, error) {
	wctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	for {
		ms, err := r.Moves.InFlight(wctx)
		if err == nil {
			return slices.ContainsFunc(ms, func(m Move) bool { return m.Group == g }), nil
		}
		if !sleepUntil(wctx, time.Now().Add(pollEvery)) {
			return false, err
		}
	}
}

// undrain undoes the drain of node i, if a fault drained it.
func (r *Runner) undrain(i int) error {
	r.mu.Lock()
	was := r.drained[i]
	delete(r.drained, i)
	r.mu.Unlock()
	if !was {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	if err := r.Moves.Drain(ctx, i, true); err != nil {
		r.record("undo the drain of n%d failed: %v", i+1, err)
		return fmt.Errorf("undo the drain of n%d: %w", i+1, err)
	}
	r.record("drain of n%d undone", i+1)
	return nil
}
