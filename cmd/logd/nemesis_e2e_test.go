package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/logd-dev/logd/api/logdv1"
	"github.com/logd-dev/logd/internal/e2e"
	"github.com/logd-dev/logd/internal/histcheck"
	"github.com/logd-dev/logd/internal/nemesis"
	"github.com/logd-dev/logd/peer"
)

// Nemesis tests (T4, T15 and the process faults of T1 and T3 in
// docs/faults.md): three real logd processes that reach each other only
// through a proxy per directed link (package internal/nemesis), a seeded
// schedule of faults (kills, pauses, partitions, lossy and slow links),
// workloads that record what clients saw, and checks after healing.
//
// Each test prints its seed; LOGD_NEMESIS_SEED=N replays the same
// schedule, and LOGD_NEMESIS_KINDS=a,b (or all) narrows or widens its
// kinds of fault. A failing run saves its history (LOGD_NEMESIS_SAVE=1: every
// run). The default run is short (nemesisShort of faults per test);
// LOGD_FAULT_LONG=1 (make fault) runs LOGD_NEMESIS_DURATION (default 20m)
// split over the nemesis tests.

const (
	// nemesisShort is a short run's schedule.
	nemesisShort = 15 * time.Second
	// nemesisLongTotal is the default of LOGD_NEMESIS_DURATION: the long
	// runs of all nemesis tests together.
	nemesisLongTotal = 20 * time.Minute
	// nemesisTests is how many TestNemesis* share the long duration.
	nemesisTests = 11
	// nemesisRecovery bounds how long a healed cluster may take to
	// acknowledge writes again.
	nemesisRecovery = time.Minute
)

// nemesisSeed is LOGD_NEMESIS_SEED, or a fresh seed; it is printed so a
// failing run can be replayed.
func nemesisSeed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("LOGD_NEMESIS_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LOGD_NEMESIS_SEED=%q: %v", s, err)
		}
		t.Logf("seed %d (from LOGD_NEMESIS_SEED)", seed)
		return seed
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (replay: LOGD_NEMESIS_SEED=%d go test -run '^%s$' ./cmd/logd/)", seed, seed, t.Name())
	return seed
}

// nemesisDuration is how long one nemesis test's schedule runs.
func nemesisDuration(t *testing.T) time.Duration {
	t.Helper()
	if !e2e.FaultLong() {
		return nemesisShort
	}
	total := nemesisLongTotal
	if s := os.Getenv("LOGD_NEMESIS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("LOGD_NEMESIS_DURATION=%q: want a positive duration", s)
		}
		total = d
	}
	return max(total/nemesisTests, nemesisShort)
}

// newNemesisCluster starts n nodes that reach each other only through the
// proxies of the returned Net (LOGD_PEER_ROUTES), and waits until all are
// voters.
// env (KEY=VALUE) is added to every node's environment.
func newNemesisCluster(t *testing.T, n int, seed uint64, env []string, extra ...string) (*e2e.Cluster, *nemesis.Net) {
	t.Helper()
	c := &e2e.Cluster{T: t}
	var targets []nemesis.Target
	for i := range n {
		nd := e2e.NewNode(t, fmt.Sprintf("n%d", i+1), extra...)
		c.Nodes = append(c.Nodes, nd)
		targets = append(targets, nemesis.Target{Raft: nd.Raft, API: nd.Listen})
	}
	nt, err := nemesis.StartNet(targets, seed)
	if err != nil {
		t.Fatal(err)
	}
	// Registered after the nodes' cleanups, so it runs before them: the
	// proxies close while the nodes still run, and then the nodes die.
	t.Cleanup(func() {
		if err := nt.Close(); err != nil {
			t.Errorf("close proxies: %v", err)
		}
	})
	for i, nd := range c.Nodes {
		routes := peer.Routes{}
		for j, other := range c.Nodes {
			if i != j {
				r := nt.Route(i, j)
				routes[other.ID] = peer.Route{Raft: r.Raft, API: r.API}
			}
		}
		nd.Env = append(slices.Clone(env), "LOGD_PEER_ROUTES="+routes.String())
	}
	c.Start()
	return c, nt
}

// procs implements nemesis.Processes over a cluster's nodes. Its methods
// run on the test goroutine (the runner's).
type procs struct{ c *e2e.Cluster }

// Leader returns the ready leader of the highest term: during a partition
// an isolated old leader may still report itself leader.
func (p procs) Leader(ctx context.Context) (int, bool) {
	best, term := -1, uint64(0)
	for i, nd := range p.c.Nodes {
		if nd.Cmd == nil {
			continue
		}
		st, err := nd.Status(ctx)
		if err == nil && st.State == "Leader" && st.Term >= term {
			best, term = i, st.Term
		}
	}
	return best, best >= 0
}

func (p procs) Kill(i int) error { p.c.Nodes[i].Kill(); return nil }

func (p procs) Restart(i int) error {
	nd := p.c.Nodes[i]
	if nd.Cmd != nil {
		return fmt.Errorf("%s is running", nd.ID)
	}
	nd.Launch("")
	return nil
}

func (p procs) Pause(i int) error  { p.c.Nodes[i].Signal(syscall.SIGSTOP); return nil }
func (p procs) Resume(i int) error { p.c.Nodes[i].Signal(syscall.SIGCONT); return nil }

func (p procs) KillAll(nodes []int) error {
	sub := &e2e.Cluster{T: p.c.T}
	for _, i := range nodes {
		sub.Nodes = append(sub.Nodes, p.c.Nodes[i])
	}
	sub.KillAll()
	return nil
}

// RestartEnv launches node i with env after its own (the peer routes and
// the power-cut mode); a later KEY wins.
func (p procs) RestartEnv(i int, env []string) error {
	nd := p.c.Nodes[i]
	if nd.Cmd != nil {
		return fmt.Errorf("%s is running", nd.ID)
	}
	base := nd.Env
	nd.Env = append(slices.Clone(base), env...)
	nd.Launch("")
	nd.Env = base
	return nil
}

// Lead waits until node i is ready, then asks it for a leadership
// transfer to itself (any node forwards it to the leader) until it leads.
func (p procs) Lead(ctx context.Context, i int) error {
	nd := p.c.Nodes[i]
	var last error
	for ctx.Err() == nil {
		st, err := nd.Status(ctx)
		if err == nil && st.Ready && st.State == "Leader" {
			return nil
		}
		if err == nil && st.Ready {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, last = nd.RPC.TransferLeadership(cctx, connect.NewRequest(&logdv1.TransferLeadershipRequest{NodeId: nd.ID}))
			cancel()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return errors.Join(last, ctx.Err())
}

// Exited reports whether node i's process is a zombie: it ended and is
// not reaped yet (kill reaps it). Linux only, as /proc is.
func (p procs) Exited(i int) bool {
	nd := p.c.Nodes[i]
	if nd.Cmd == nil || nd.Cmd.Process == nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", nd.Cmd.Process.Pid))
	if err != nil {
		return false
	}
	// The state follows the command's name in parentheses.
	rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
	return strings.HasPrefix(strings.TrimSpace(rest), "Z")
}

// checkRouted fails the test unless every node's Raft traffic went
// through the proxies, as the dialer (a leader, a candidate) or as the
// one dialed: nodes that dialed each other directly would make every
// network fault a no-op.
func checkRouted(t *testing.T, nt *nemesis.Net) {
	t.Helper()
	for j := range nt.Size() {
		var got int64
		for i := range nt.Size() {
			if i != j {
				in, _ := nt.Stats(i, j)
				out, _ := nt.Stats(j, i)
				got += in.Bytes + out.Bytes
			}
		}
		if got == 0 {
			t.Errorf("no Raft bytes to or from n%d went through the proxies: the nodes dial around them", j+1)
		}
	}
}

// runNemesis runs a schedule of the given kinds against a three-node
// cluster under the workloads, then heals, converges and checks: the
// history with histcheck's checkers, and every node's copy of the append
// topic with e2e.Cluster.CheckEveryNode. A failing run saves its history, schedule
// and events (nemesisOut).
func runNemesis(t *testing.T, kinds ...nemesis.Kind) { runNemesisWith(t, nemesisOptions{}, kinds...) }

// nemesisOptions vary a nemesis run's cluster.
type nemesisOptions struct {
	// store is the nodes' --raft-log-store (LOGD_RAFT_LOG_STORE; empty:
	// logd's default).
	store string
	// nodes is the cluster's size (0: three).
	nodes int
	// args are added to every node's flags.
	args []string
}

// runNemesisWith is runNemesis on the cluster o describes.
func runNemesisWith(t *testing.T, o nemesisOptions, kinds ...nemesis.Kind) {
	store := o.store
	size := cmp.Or(o.nodes, 3)
	// Their schedules run for a set time, mostly waiting between faults.
	e2e.ParallelShort(t)
	if s := os.Getenv("LOGD_NEMESIS_KINDS"); s != "" {
		ks, err := nemesis.ParseKinds(s)
		if err != nil {
			t.Fatalf("LOGD_NEMESIS_KINDS: %v", err)
		}
		t.Logf("kinds %v (from LOGD_NEMESIS_KINDS)", ks)
		kinds = ks
	}
	seed := nemesisSeed(t)
	dur := nemesisDuration(t)
	sched, err := nemesis.NewSchedule(seed, size, dur, kinds)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("schedule: %v", sched)
	ctx, cancel := context.WithTimeout(context.Background(), dur+5*time.Minute)
	defer cancel()
	var env []string
	if store != "" {
		env = append(env, "LOGD_RAFT_LOG_STORE="+store)
	}
	disk := slices.ContainsFunc(kinds, func(k nemesis.Kind) bool { return k.Restarts() || k == nemesis.PowerCutAll })
	if disk {
		// Every start after a SIGKILL is then a power cut of that node.
		env = append(env, "LOGD_FAULT_POWERCUT="+powerCutMode())
	}
	// Raft at info and logd at debug: a failing run's saved logs show its
	// elections and installs, and each applied entry's result, so two
	// nodes' logs can be compared entry by entry.
	args := append([]string{"--snapshot-threshold", "256", "--snapshot-interval", "200ms",
		"--raft-log-level", "info", "--log-level", "debug"}, o.args...)
	c, nt := newNemesisCluster(t, size, seed, env, args...)
	w := newWorkload(t, c, seed)
	if disk {
		// Small segments, so the logRoll failpoint is reached.
		w.segmentBytes = "16384"
	}
	w.prepare(ctx)
	r := &nemesis.Runner{Procs: procs{c}, Net: nt, Members: &members{c: c, w: w}, Moves: moves{c}, Logf: t.Logf}
	saved := false
	// start is the schedule's zero (set when the faults begin).
	var start time.Time
	save := func(verdicts []histcheck.Verdict) {
		if (t.Failed() || os.Getenv("LOGD_NEMESIS_SAVE") == "1") && !saved {
			saved = true
			saveRun(t, seed, sched, r.Events(), w.rec.Ops(), verdicts, c.Nodes, start, w.rec.Start())
		}
	}
	// A run that stops before its checks (a cluster that never
	// converges, say) saves what it has, with the verdicts on the history
	// so far: a divergence that kept the nodes apart is named there.
	defer func() {
		if saved || !t.Failed() {
			save(nil)
			return
		}
		ops := w.rec.Ops()
		verdicts := histcheck.CheckAll(ops, histcheck.Options{ClockSlack: int64(time.Second)})
		for _, v := range verdicts {
			if !v.OK() {
				t.Logf("verdict on the history so far %v", &v)
			}
		}
		save(verdicts)
	}()
	w.start(ctx)
	w.waitAcks(ctx, "appends before the faults", 20)

	// phases times the steps after the faults, for the final log line.
	var phases []string
	last := time.Now()
	phase := func(name string) {
		phases = append(phases, fmt.Sprintf("%s %v", name, time.Since(last).Round(time.Millisecond)))
		last = time.Now()
	}
	start = time.Now()
	if err := r.Run(ctx, start, sched); err != nil {
		t.Errorf("nemesis: %v", err)
	}
	if hit, n := r.MovesHit(); n > 0 {
		// A fault that saw no move in flight, or whose move finished
		// before its kill, proved nothing of moves; a run where none
		// did proved nothing at all.
		t.Logf("%d of %d kill-mid-move faults killed a node while a move was in flight", hit, n)
		if hit == 0 {
			t.Errorf("none of the %d kill-mid-move faults killed a node while a move was in flight", n)
		}
	}
	phase("faults")
	// Healed: the cluster must take writes again, soon.
	rctx, rcancel := context.WithTimeout(ctx, nemesisRecovery)
	w.waitAcks(rctx, fmt.Sprintf("20 appends acknowledged within %v of healing", nemesisRecovery), 20)
	rcancel()
	w.halt()
	phase("recovery")
	c.Converge(ctx)
	w.resendKeyed(ctx, 50)
	w.drainQueue(ctx)
	c.Converge(ctx)
	phase("drain")
	for _, nd := range c.Nodes {
		w.finalQueue(ctx, nd)
	}
	w.scan(ctx)
	checkRouted(t, nt)
	acks, attempted := w.acks()
	c.CheckEveryNode(ctx, wTopic, wParts, acks, attempted)
	phase("final reads")

	ops := w.rec.Ops()
	// The leader stamps lease deadlines with its clock, this process reads
	// them in milliseconds: the same machine's clock, so little slack,
	// unless a clock-offset fault moved a node's clock.
	slack := 100 * time.Millisecond
	for _, st := range sched.Steps {
		if st.Kind == nemesis.ClockOffset {
			slack = max(slack, 100*time.Millisecond+st.Offset.Abs())
		}
	}
	verdicts := histcheck.CheckAll(ops, histcheck.Options{ClockSlack: int64(slack), VisualizeDir: runDir(t, seed)})
	phase("checks")
	for _, v := range verdicts {
		if v.OK() {
			t.Logf("verdict %v", &v)
		} else {
			t.Errorf("verdict %v", &v)
		}
	}
	save(verdicts)
	t.Logf("%d faults; %d calls recorded, %d appends acknowledged; took %s",
		len(sched.Steps), len(ops), len(acks), strings.Join(phases, ", "))
}

// TestNemesisKill: the leader, a random node or a majority SIGKILLed and
// restarted.
func TestNemesisKill(t *testing.T) {
	runNemesis(t, nemesis.KillLeader, nemesis.KillRandom, nemesis.KillMajority)
}

// TestNemesisKillBoltDB: the kills of TestNemesisKill and the power cut
// of the whole cluster, with Raft's log in raft-boltdb (the default run
// has them on logd's default store, raft-wal). Long runs only.
func TestNemesisKillBoltDB(t *testing.T) {
	if !e2e.FaultLong() {
		t.Skip("LOGD_FAULT_LONG=1 (make fault) runs the kills on raft-boltdb too")
	}
	runNemesisWith(t, nemesisOptions{store: "boltdb"}, nemesis.KillLeader, nemesis.KillRandom, nemesis.KillMajority, nemesis.PowerCutAll)
}

// TestNemesisPause: the leader or a minority SIGSTOPped past the election
// and lease timeouts, then resumed.
func TestNemesisPause(t *testing.T) {
	runNemesis(t, nemesis.PauseLeader, nemesis.PauseMinority)
}

// TestNemesisPartition: the leader isolated, a minority split from the
// majority, or a bridge node that alone sees both halves.
func TestNemesisPartition(t *testing.T) {
	runNemesis(t, nemesis.IsolateLeader, nemesis.Split, nemesis.Bridge)
}

// TestNemesisLink: one direction of some links lossy or cut, or every
// link slow with jitter.
func TestNemesisLink(t *testing.T) {
	runNemesis(t, nemesis.OneWay, nemesis.Slow)
}

// TestNemesisDisk: the whole cluster power-cut (every node runs with
// LOGD_FAULT_POWERCUT, so each start after a SIGKILL cuts its partition
// logs back to what was synced), a node crashed inside a durability step
// by a failpoint, or run for a while with a slow disk or a clock seconds
// off.
func TestNemesisDisk(t *testing.T) {
	runNemesis(t, nemesis.PowerCutAll, nemesis.CrashFailpoint, nemesis.SlowDisk, nemesis.ClockOffset)
}

// TestNemesisMembership: a follower removed, while it runs on or after it
// was killed, and added back with fresh data, under the workloads; the
// history's membership changes let the membership checker judge what the
// removed node acknowledged.
func TestNemesisMembership(t *testing.T) {
	// The meta group's membership: a node holding data group replicas is
	// drained before its removal (TestNemesisDataGroupsMidMove drains).
	runNemesisWith(t, nemesisOptions{args: e2e.MetaGroupOnly()}, nemesis.Membership)
}

// TestNemesisDataGroups: kills, pauses and partitions of a three-node
// cluster whose topics are placed over six data groups (two per node), so
// each fault hits the meta group and every data group on the node or
// link at once; the workloads' appends, consumer group and queue group
// run over the groups. The history checkers and the every-node reads
// judge the outcome as for one group.
func TestNemesisDataGroups(t *testing.T) {
	runNemesisWith(t, nemesisOptions{args: []string{"--data-groups-per-node", "2"}},
		nemesis.KillLeader, nemesis.KillRandom, nemesis.PauseLeader, nemesis.IsolateLeader, nemesis.Split)
}

// TestNemesisDataGroupsFive is TestNemesisDataGroups on five nodes with a
// replication factor of 3, so no node holds every group: a node reads and
// routes what it does not hold through the others; and with a dead-node
// timeout of 2 s, so the faults move replicas (evacuations, then
// balancing back); kill-mid-move faults drain nodes and kill a move's
// source, target or the meta leader while it is in flight. Long runs
// only.
func TestNemesisDataGroupsFive(t *testing.T) {
	if !e2e.FaultLong() {
		t.Skip("LOGD_FAULT_LONG=1 (make fault) runs the data groups' nemesis on five nodes")
	}
	// A short dead-node timeout: a node killed or cut off for a few
	// seconds has its replicas rebuilt on the others and, back, takes
	// its share again by balancing, so replicas move under the faults.
	runNemesisWith(t, nemesisOptions{nodes: 5, args: []string{"--data-groups-per-node", "1", "--dead-node-timeout", "2s"}},
		nemesis.KillLeader, nemesis.KillRandom, nemesis.PauseMinority, nemesis.IsolateLeader, nemesis.Split, nemesis.KillMidMove)
}

// TestNemesisDataGroupsMidMove: nodes drained, one at a time, on four
// nodes with a replication factor of 3 and one data group per node, and
// while a replica move the drain started is in flight, its source (the
// node a group loses), its target (the node a group gains) or the meta
// leader SIGKILLed; restarted, and the drain undone, so balancing moves
// replicas back. The run fails if no fault killed a node with a move in
// flight. Long runs only: a short run of 15 s of faults took 24 to 61 s
// on a busy two-core machine, its recovery and drain phases slowed by
// writes that wait on a meta leader's removed replicas (docs/faults.md,
// "Moves in flight").
func TestNemesisDataGroupsMidMove(t *testing.T) {
	if !e2e.FaultLong() {
		t.Skip("LOGD_FAULT_LONG=1 (make fault) kills nodes while replicas move")
	}
	runNemesisWith(t, nemesisOptions{nodes: 4, args: []string{"--data-groups-per-node", "1"}}, nemesis.KillMidMove)
}

// TestNemesisMixed: every kind of fault, drawn from one schedule (long
// runs only), but the replica moves', which need data groups.
func TestNemesisMixed(t *testing.T) {
	if !e2e.FaultLong() {
		t.Skip("LOGD_FAULT_LONG=1 (make fault) mixes every kind of fault")
	}
	// Membership changes among them: the meta group's, as
	// TestNemesisMembership's.
	runNemesisWith(t, nemesisOptions{args: e2e.MetaGroupOnly()}, slices.DeleteFunc(nemesis.AllKinds(), nemesis.Kind.NeedsMoves)...)
}

// nemesisOut is where a failing run saves its files: $LOGD_NEMESIS_OUT,
// or logd-nemesis-out in the system's temporary directory (not the test's,
// which is removed).
func nemesisOut() string {
	if d := os.Getenv("LOGD_NEMESIS_OUT"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "logd-nemesis-out")
}

// runDir is where a run's files go: porcupine's visualization of a
// partition that is not linearizable, and a failing run's history.
func runDir(t *testing.T, seed uint64) string {
	return filepath.Join(nemesisOut(), fmt.Sprintf("%s-%d", t.Name(), seed))
}

// saveRun writes a failing run's history (history.jsonl, which
// internal/histcheck's TestRecheck re-checks offline), its schedule and
// events, its verdicts and every node's whole log (<id>.log; the test's
// output has only their tails), under nemesisOut, and prints where.
func saveRun(t *testing.T, seed uint64, sched nemesis.Schedule, events []nemesis.Event, ops []histcheck.Op, verdicts []histcheck.Verdict, nodes []*e2e.Node, start, history time.Time) {
	t.Helper()
	dir := runDir(t, seed)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("save the run: %v", err)
		return
	}
	if err := histcheck.SaveFile(filepath.Join(dir, "history.jsonl"), ops); err != nil {
		t.Errorf("save the history: %v", err)
	}
	var b strings.Builder
	// The two clocks: the schedule's and events' t+ count from the start
	// of the faults, the history's call and return times from the
	// recorder's start, earlier; the node logs show wall-clock times.
	const wall = "15:04:05.000"
	fmt.Fprintf(&b, "clocks: schedule and events from %s UTC (t+0); history times from %s UTC", start.UTC().Format(wall), history.UTC().Format(wall))
	if !start.IsZero() {
		fmt.Fprintf(&b, ", %v before t+0", start.Sub(history).Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "\n\n%s\n\nevents:\n", sched)
	for _, e := range events {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	if len(verdicts) > 0 {
		fmt.Fprintf(&b, "\nverdicts:\n%s\n", histcheck.Report(verdicts))
	}
	if err := os.WriteFile(filepath.Join(dir, "run.txt"), []byte(b.String()), 0o644); err != nil {
		t.Errorf("save the schedule: %v", err)
	}
	for _, nd := range nodes {
		b, err := os.ReadFile(nd.Logs.Name())
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, nd.ID+".log"), b, 0o644)
		}
		if err != nil {
			t.Errorf("save %s's log: %v", nd.ID, err)
		}
	}
	t.Logf("saved the history, schedule, verdicts and node logs in %s (re-check: go test ./internal/histcheck -run TestRecheck -args -history %s)",
		dir, filepath.Join(dir, "history.jsonl"))
}
