package nemesis

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestScheduleDeterministic: the same seed gives the same schedule, and
// every schedule keeps to its kinds, its duration and its calm periods.
func TestScheduleDeterministic(t *testing.T) {
	const total = 10 * time.Minute
	differ := 0
	for seed := uint64(1); seed <= 50; seed++ {
		a, err := NewSchedule(seed, 3, total, AllKinds())
		if err != nil {
			t.Fatal(err)
		}
		b, _ := NewSchedule(seed, 3, total, AllKinds())
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d gave two schedules:\n%v\n%v", seed, a, b)
		}
		c, _ := NewSchedule(seed+1000, 3, total, AllKinds())
		if !reflect.DeepEqual(a.Steps, c.Steps) {
			differ++
		}
		if len(a.Steps) < 20 {
			t.Fatalf("seed %d: %d faults in %v", seed, len(a.Steps), total)
		}
		end := time.Duration(0)
		for i, st := range a.Steps {
			spec, ok := kinds[st.Kind]
			switch {
			case !ok:
				t.Fatalf("seed %d step %d: unknown kind %q", seed, i, st.Kind)
			case st.At-end < minCalm || st.At-end > maxCalm:
				t.Fatalf("seed %d step %d: %v of calm before it", seed, i, st.At-end)
			case st.For < spec.min || st.For > spec.max:
				t.Fatalf("seed %d step %d: %s lasts %v", seed, i, st.Kind, st.For)
			case st.At+st.For > total:
				t.Fatalf("seed %d step %d ends after the run", seed, i)
			}
			if (st.Kind == KillMidMove) != slices.Contains(roles, st.Role) {
				t.Fatalf("seed %d step %d: %s with role %q", seed, i, st.Kind, st.Role)
			}
			if p := slices.Sorted(slices.Values(st.Order)); !slices.Equal(p, []int{0, 1, 2}) {
				t.Fatalf("seed %d step %d: order %v is not a permutation", seed, i, st.Order)
			}
			end = st.At + st.For
		}
	}
	if differ < 45 {
		t.Errorf("only %d of 50 seeds gave a schedule unlike another seed's", differ)
	}

	only, err := ParseKinds("pause-leader,split")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := NewSchedule(7, 5, total, only)
	seen := map[Kind]bool{}
	for _, st := range s.Steps {
		seen[st.Kind] = true
	}
	if len(seen) != 2 || !seen[PauseLeader] || !seen[Split] {
		t.Errorf("kinds pause-leader,split drew %v", seen)
	}
	for _, bad := range []string{"", "pause", "split,nope"} {
		if _, err := ParseKinds(bad); err == nil {
			t.Errorf("ParseKinds(%q) accepted", bad)
		}
	}
	if _, err := NewSchedule(1, 1, total, AllKinds()); err == nil {
		t.Error("a schedule for one node")
	}
}

// TestScheduleKillMidMove: a schedule of kill-mid-move faults draws every
// role over a few seeds, the same roles again from the same seed, and
// says in each step which role it kills; a kind
// list without it draws the schedule it drew before the kind existed.
func TestScheduleKillMidMove(t *testing.T) {
	drawn := map[Role]int{}
	for seed := uint64(1); seed <= 20; seed++ {
		a, err := NewSchedule(seed, 5, 2*time.Minute, []Kind{KillMidMove})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := NewSchedule(seed, 5, 2*time.Minute, []Kind{KillMidMove})
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d gave two schedules:\n%v\n%v", seed, a, b)
		}
		for i, st := range a.Steps {
			drawn[st.Role]++
			want := fmt.Sprintf("kill-mid-move for %v order %v kill the %s", st.For.Round(time.Millisecond), st.Order, st.Role)
			if !strings.HasSuffix(st.String(), want) {
				t.Errorf("seed %d step %d: %q, want it to end %q", seed, i, st.String(), want)
			}
			if st.For < 2*time.Second || st.For > 6*time.Second {
				t.Errorf("seed %d step %d lasts %v", seed, i, st.For)
			}
		}
	}
	for _, r := range roles {
		if drawn[r] < 10 {
			t.Errorf("role %s drawn %d times in 20 schedules: %v", r, drawn[r], drawn)
		}
	}
	if !KillMidMove.NeedsMoves() || KillLeader.NeedsMoves() {
		t.Error("NeedsMoves: only kill-mid-move starts moves")
	}
	// Drawn by kinds without KillMidMove, the other faults take no
	// draw of a role: their schedules replay as before.
	ks := []Kind{KillLeader, Split, Membership}
	s, _ := NewSchedule(3, 3, 2*time.Minute, ks)
	for _, st := range s.Steps {
		if st.Role != "" {
			t.Errorf("%s drew role %q", st.Kind, st.Role)
		}
	}
}

// fakeProcs records what the runner does.
type fakeProcs struct {
	mu     sync.Mutex
	leader int
	calls  []string
}

func (f *fakeProcs) Leader(context.Context) (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader, f.leader >= 0
}

func (f *fakeProcs) do(what string, i int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("%s %d", what, i))
	return nil
}

func (f *fakeProcs) Kill(i int) error    { return f.do("kill", i) }
func (f *fakeProcs) Restart(i int) error { return f.do("restart", i) }
func (f *fakeProcs) Pause(i int) error   { return f.do("pause", i) }
func (f *fakeProcs) Resume(i int) error  { return f.do("resume", i) }
func (f *fakeProcs) Exited(i int) bool   { return i == 1 }

func (f *fakeProcs) Lead(_ context.Context, i int) error { return f.do("lead", i) }

func (f *fakeProcs) KillAll(nodes []int) error {
	return f.do(fmt.Sprintf("kill-all %v", nodes), len(nodes))
}

func (f *fakeProcs) RestartEnv(i int, env []string) error {
	return f.do(fmt.Sprintf("restart %v", env), i)
}

// fakeMoves records drains in its fakeProcs' calls and answers InFlight
// from a script per drained node: the n-th call after the drain of node i
// gets script[i][n], the calls after the script its last answer.
// Replicas answers held, or an error when it is nil.
type fakeMoves struct {
	*fakeProcs
	script map[int][][]Move
	held   map[int]int
	cur    [][]Move // guarded by fakeProcs.mu
}

func (f *fakeMoves) Replicas(context.Context) (map[int]int, error) {
	if f.held == nil {
		return nil, errors.New("no table")
	}
	return f.held, nil
}

func (f *fakeMoves) Drain(_ context.Context, i int, undo bool) error {
	if undo {
		return f.do("undrain", i)
	}
	f.mu.Lock()
	f.cur = f.script[i]
	f.mu.Unlock()
	return f.do("drain", i)
}

func (f *fakeMoves) InFlight(context.Context) ([]Move, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.cur) == 0 {
		return nil, nil
	}
	ms := f.cur[0]
	if len(f.cur) > 1 {
		f.cur = f.cur[1:]
	}
	return ms, nil
}

func (f *fakeProcs) Remove(_ context.Context, i int) error { return f.do("remove", i) }
func (f *fakeProcs) Rejoin(_ context.Context, i int) error { return f.do("rejoin", i) }

// TestRunnerRestartFaults: the faults that restart nodes with a fault's
// environment restart them without it when healed; a power cut kills
// every node at once; a membership fault removes a follower, killed first
// when dead, and adds it back.
func TestRunnerRestartFaults(t *testing.T) {
	procs := &fakeProcs{leader: 2}
	var lines []string
	r := &Runner{Procs: procs, Members: procs, Logf: func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }}
	ms := time.Millisecond
	s := Schedule{Seed: 1, Nodes: 3, Steps: []Step{
		{At: 0, For: 10 * ms, Fault: Fault{Kind: PowerCutAll, Order: []int{0, 1, 2}}},
		{At: 20 * ms, For: 10 * ms, Fault: Fault{Kind: CrashFailpoint, Order: []int{1, 0, 2}, Point: "logFsync", Term: "1*panic"}},
		{At: 40 * ms, For: 10 * ms, Fault: Fault{Kind: SlowDisk, Order: []int{0, 1, 2}, Leader: true, Delay: 20 * ms, Jitter: 5 * ms}},
		{At: 60 * ms, For: 10 * ms, Fault: Fault{Kind: ClockOffset, Order: []int{0, 1, 2}, Offset: -2 * time.Second, Leader: true}},
		{At: 80 * ms, For: 10 * ms, Fault: Fault{Kind: Membership, Order: []int{2, 0, 1}, Dead: true}},
		{At: 100 * ms, For: 10 * ms, Fault: Fault{Kind: Membership, Order: []int{2, 1, 0}}},
	}}
	if err := r.Run(context.Background(), time.Now(), s); err != nil {
		t.Fatal(err)
	}
	want := []string{"kill-all [0 1 2] 3", "restart 0", "restart 1", "restart 2",
		"kill 1", "restart [GOFAIL_FAILPOINTS=logFsync=1*panic] 1", "kill 1", "restart 1",
		"kill 2", "restart [LOGD_FAULT_SLOW_FSYNC=20ms,5ms] 2", "kill 2", "restart 2",
		"kill 0", "restart [LOGD_FAULT_CLOCK_OFFSET=-2s] 0", "lead 0", "kill 0", "restart 0",
		"kill 0", "remove 0", "rejoin 0",
		"remove 1", "rejoin 1"}
	if !slices.Equal(procs.calls, want) {
		t.Errorf("calls\n%v, want\n%v", procs.calls, want)
	}
	if text := strings.Join(lines, "\n"); !strings.Contains(text, "n2 crashed at logFsync (1*panic)") ||
		!strings.Contains(text, "n1 removed (dead)") || !strings.Contains(text, "n2 removed (still running)") {
		t.Errorf("log lines:\n%s", text)
	}
	if err := (&Runner{Procs: procs}).Run(context.Background(), time.Now(), s); err == nil {
		t.Error("a runner without Members ran membership faults")
	}
}

// TestRunnerKillMidMove: a kill-mid-move fault drains its node, waits for
// a move in flight, kills the move's source, its target or the meta
// leader (the first node of its order in that role), and heals by
// restarting it and undoing the drain; one that sees no move kills
// nothing, and one whose move finished before the kill is not a hit.
func TestRunnerKillMidMove(t *testing.T) {
	procs := &fakeProcs{leader: 2}
	moves := &fakeMoves{fakeProcs: procs, script: map[int][][]Move{
		// n2 drained: no move listed at first, then one, done after the
		// kill.
		1: {nil, nil, {{Group: 3, Added: []int{2}, Removed: []int{1}}}, {{Group: 3, Added: []int{2}, Removed: []int{1}, Done: true}}},
		// n1 drained: two moves; n4 comes before n3 in the order.
		0: {{{Group: 2, Added: []int{3}, Removed: []int{0}}, {Group: 1, Added: []int{2}, Removed: []int{0}}}},
		// n4 drained: a move the meta leader n3 takes no part in.
		3: {{{Group: 5, Added: []int{1}, Removed: []int{3}}}},
		// n5 drained: nothing moves.
		4: {nil},
		// n3 drained: a move seen done, then in flight, then gone by the
		// kill.
		2: {{{Group: 4, Added: []int{0}, Removed: []int{2}, Done: true}}, {{Group: 4, Added: []int{0}, Removed: []int{2}}}, nil},
	}}
	var lines []string
	r := &Runner{Procs: procs, Moves: moves, MoveWait: 200 * time.Millisecond,
		Logf: func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }}
	ms := time.Millisecond
	s := Schedule{Seed: 1, Nodes: 5, Steps: []Step{
		{At: 0, For: 10 * ms, Fault: Fault{Kind: KillMidMove, Order: []int{1, 0, 2, 3, 4}, Role: RoleSource}},
		{At: 20 * ms, For: 10 * ms, Fault: Fault{Kind: KillMidMove, Order: []int{0, 3, 2, 1, 4}, Role: RoleTarget}},
		{At: 40 * ms, For: 10 * ms, Fault: Fault{Kind: KillMidMove, Order: []int{3, 0, 1, 2, 4}, Role: RoleMetaLeader}},
		{At: 60 * ms, For: 10 * ms, Fault: Fault{Kind: KillMidMove, Order: []int{4, 0, 1, 2, 3}, Role: RoleSource}},
		{At: 80 * ms, For: 10 * ms, Fault: Fault{Kind: KillMidMove, Order: []int{2, 0, 1, 3, 4}, Role: RoleTarget}},
	}}
	if err := r.Run(context.Background(), time.Now(), s); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"drain 1", "kill 1", "restart 1", "undrain 1",
		"drain 0", "kill 3", "restart 3", "undrain 0",
		"drain 3", "kill 2", "restart 2", "undrain 3",
		"drain 4", "undrain 4",
		"drain 2", "kill 0", "restart 0", "undrain 2"}
	if !slices.Equal(procs.calls, want) {
		t.Errorf("calls\n%v, want\n%v", procs.calls, want)
	}
	if hit, n := r.MovesHit(); hit != 3 || n != 5 {
		t.Errorf("%d of %d faults hit a move in flight, want 3 of 5", hit, n)
	}
	text := strings.Join(lines, "\n")
	for _, w := range []string{
		"kill-mid-move: kill -9 [n2] (source of group 3 +n3 -n2)",
		"kill-mid-move: kill -9 [n4] (target of group 2 +n4 -n1)",
		"kill-mid-move: kill -9 [n3] (meta leader n3, group 5 +n2 -n4 in flight)",
		"kill-mid-move: draining n2 (replicas not known: no table)",
		"group 3's move still marked after the kill",
		"no move in flight with a source within 200ms, nothing killed: no move in flight (marked: [])",
		"group 4's move no longer marked after the kill",
		"drain of n5 undone",
	} {
		if !strings.Contains(text, w) {
			t.Errorf("no line %q in\n%s", w, text)
		}
	}
	if err := (&Runner{Procs: procs}).Run(context.Background(), time.Now(), s); err == nil {
		t.Error("a runner without Moves ran kill-mid-move faults")
	}

	// The first node of the order that holds replicas is drained.
	procs.calls, lines = nil, nil
	moves.held = map[int]int{0: 2, 1: 0, 2: 1}
	first := Schedule{Nodes: 5, Steps: []Step{{For: 10 * ms, Fault: Fault{Kind: KillMidMove, Order: []int{1, 0, 2, 3, 4}, Role: RoleSource}}}}
	if err := r.Run(context.Background(), time.Now(), first); err != nil {
		t.Fatal(err)
	}
	if want := []string{"drain 0", "kill 0", "restart 0", "undrain 0"}; !slices.Equal(procs.calls, want) {
		t.Errorf("n2 holding no replica: calls %v, want %v", procs.calls, want)
	}
	if text := strings.Join(lines, "\n"); !strings.Contains(text, "draining n1 (holds 2 replicas)") {
		t.Errorf("n2 holding no replica: log\n%s", text)
	}

	// Cut short mid-fault, the run restarts the node and undoes the drain.
	procs.calls = nil
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	long := Schedule{Nodes: 5, Steps: []Step{{For: time.Hour, Fault: Fault{Kind: KillMidMove, Order: []int{1, 0, 2, 3, 4}, Role: RoleTarget}}}}
	go func() { done <- r.Run(ctx, time.Now(), long) }()
	waitUntil(t, func() bool {
		procs.mu.Lock()
		defer procs.mu.Unlock()
		return slices.Contains(procs.calls, "kill 2")
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if want := []string{"drain 0", "kill 2", "restart 2", "undrain 0"}; !slices.Equal(procs.calls, want) {
		t.Errorf("a cancelled run: calls %v, want %v", procs.calls, want)
	}
}

// TestRunner applies a schedule to fake processes and a real Net: each
// fault in its turn, each healed, and the network open at the end.
func TestRunner(t *testing.T) {
	nt := startNet(t, 3)
	procs := &fakeProcs{leader: 2}
	links := func() map[[2]int]Link {
		out := map[[2]int]Link{}
		for i := range 3 {
			for j := range 3 {
				if i != j && nt.Link(i, j) != (Link{}) {
					out[[2]int{i, j}] = nt.Link(i, j)
				}
			}
		}
		return out
	}
	// The links as they are when a fault is logged (after it is applied,
	// before it is healed), by kind.
	var lines []string
	during := map[string]map[[2]int]Link{}
	r := &Runner{Procs: procs, Net: nt, Logf: func(f string, a ...any) {
		line := fmt.Sprintf(f, a...)
		lines = append(lines, line)
		for _, k := range []Kind{Bridge, OneWay} {
			if strings.HasPrefix(line, "nemesis t+") && strings.Contains(line, " "+string(k)) && !strings.Contains(line, "heal") {
				during[string(k)] = links()
			}
		}
	}}
	ms := time.Millisecond
	s := Schedule{Seed: 1, Nodes: 3, Steps: []Step{
		{At: 10 * ms, For: 20 * ms, Fault: Fault{Kind: KillLeader, Order: []int{0, 1, 2}}},
		{At: 40 * ms, For: 20 * ms, Fault: Fault{Kind: KillMajority, Order: []int{1, 0, 2}}},
		{At: 70 * ms, For: 20 * ms, Fault: Fault{Kind: PauseMinority, Order: []int{1, 0, 2}}},
		{At: 100 * ms, For: 20 * ms, Fault: Fault{Kind: Bridge, Order: []int{1, 0, 2}, Link: Link{Cut: Refuse}}},
		{At: 130 * ms, For: 20 * ms, Fault: Fault{Kind: OneWay, Order: []int{0, 1, 2}, Leader: true, Link: Link{Loss: 0.5}}},
	}}
	if err := r.Run(context.Background(), time.Now(), s); err != nil {
		t.Fatal(err)
	}
	cut := Link{Cut: Refuse}
	if want := map[[2]int]Link{{0, 2}: cut, {2, 0}: cut}; !reflect.DeepEqual(during[string(Bridge)], want) {
		t.Errorf("during the bridge through n2: links %v, want %v", during[string(Bridge)], want)
	}
	lossy := Link{Loss: 0.5}
	if want := map[[2]int]Link{{2, 0}: lossy}; !reflect.DeepEqual(during[string(OneWay)], want) {
		t.Errorf("during one-way loss from the leader n3: links %v, want %v", during[string(OneWay)], want)
	}
	if l := links(); len(l) != 0 {
		t.Errorf("after the run: links %v still set", l)
	}
	want := []string{"kill 2", "restart 2", "kill 1", "kill 0", "restart 1", "restart 0", "pause 1", "resume 1"}
	if !slices.Equal(procs.calls, want) {
		t.Errorf("calls %v, want %v", procs.calls, want)
	}
	ev := r.Events()
	if len(ev) != 10 {
		t.Errorf("%d events, want 10 (5 faults, 5 heals): %v", len(ev), ev)
	}
	for i := 1; i < len(ev); i++ {
		if ev[i].At < ev[i-1].At {
			t.Errorf("event %d at %v before event %d at %v", i, ev[i].At, i-1, ev[i-1].At)
		}
	}
	if len(lines) != len(ev) || !strings.Contains(lines[0], "kill-leader: kill -9 [n3] (leader n3)") {
		t.Errorf("log lines %q", lines)
	}
}

// TestRunnerHealsOnCancel: a run cut short by its context leaves nothing
// killed, paused or cut.
func TestRunnerHealsOnCancel(t *testing.T) {
	nt := startNet(t, 3)
	procs := &fakeProcs{leader: -1}
	r := &Runner{Procs: procs, Net: nt}
	ctx, cancel := context.WithCancel(context.Background())
	s := Schedule{Nodes: 3, Steps: []Step{
		{At: 0, For: time.Hour, Fault: Fault{Kind: IsolateLeader, Order: []int{1, 0, 2}, Link: Link{Cut: Blackhole}}},
	}}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, time.Now(), s) }()
	waitUntil(t, func() bool { return nt.Link(1, 0).Cut == Blackhole })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if nt.Link(1, 0) != (Link{}) || nt.Link(0, 1) != (Link{}) {
		t.Error("links still cut after a cancelled run")
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}
