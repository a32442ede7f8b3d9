package nemesis

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Kind is a kind of fault.
type Kind string

// The kinds of fault. "The leader" is whoever leads when the fault starts
// (or a node of the schedule's choosing when none does); the other nodes
// a fault picks are drawn by the schedule, so a replay picks the same.
const (
	// KillLeader SIGKILLs the leader and restarts it when the fault ends.
	KillLeader Kind = "kill-leader"
	// KillRandom SIGKILLs one node and restarts it.
	KillRandom Kind = "kill-random"
	// KillMajority SIGKILLs a majority and restarts it.
	KillMajority Kind = "kill-majority"
	// PauseLeader SIGSTOPs the leader, past election and lease timeouts,
	// then SIGCONTs it.
	PauseLeader Kind = "pause-leader"
	// PauseMinority SIGSTOPs a minority, then SIGCONTs it.
	PauseMinority Kind = "pause-minority"
	// IsolateLeader cuts the leader from every other node, both ways.
	IsolateLeader Kind = "isolate-leader"
	// Split cuts a minority from the majority, both ways.
	Split Kind = "split"
	// Bridge splits the others in two halves that cannot reach each other
	// and one node, the bridge, that reaches both.
	Bridge Kind = "bridge"
	// OneWay makes the links from one node (the leader, or a drawn one) to
	// one or all others lossy or cut, in that direction only.
	OneWay Kind = "one-way"
	// Slow adds latency and jitter to every link.
	Slow Kind = "latency"
	// PowerCutAll SIGKILLs every node at once and restarts them all: a
	// power cut of the cluster when the nodes run with LOGD_FAULT_POWERCUT
	// (internal/faults), which cuts each node's partition logs back to
	// what was synced when it starts again.
	PowerCutAll Kind = "power-cut-all"
	// CrashFailpoint restarts one node with GOFAIL_FAILPOINTS set to a
	// durability failpoint (internal/failpoint) and a term that makes it
	// panic there soon; when the fault ends the node, crashed or not, is
	// started again without it.
	CrashFailpoint Kind = "crash-at-failpoint"
	// SlowDisk restarts one node (the leader, or a drawn one) with
	// LOGD_FAULT_SLOW_FSYNC, then restarts it with a normal disk.
	SlowDisk Kind = "slow-disk"
	// ClockOffset restarts one node with LOGD_FAULT_CLOCK_OFFSET, a few
	// seconds ahead or behind (and may hand it the leadership, whose clock
	// stamps lease deadlines), then restarts it with the true clock.
	ClockOffset Kind = "clock-offset"
	// Membership removes a follower from the cluster (while it still runs,
	// or after killing it) and, when the fault ends, adds it back with
	// fresh data under the same id.
	Membership Kind = "membership"
	// KillMidMove drains a node (Moves) that holds data group replicas,
	// so that the meta leader moves them off it, waits until a move is in
	// flight, and
	// SIGKILLs the move's source (a node it removes), its target (a node
	// it adds) or the meta leader, by the schedule's draw (Role); when
	// the fault ends it restarts the node and undoes the drain, and
	// balancing moves replicas back.
	KillMidMove Kind = "kill-mid-move"
)

// Role is which node of a replica move in flight a KillMidMove fault
// kills.
type Role string

// The roles a KillMidMove fault draws from.
const (
	// RoleSource is a node the move removes from its group.
	RoleSource Role = "source"
	// RoleTarget is a node the move adds to its group.
	RoleTarget Role = "target"
	// RoleMetaLeader is the meta group's leader, which starts, drives and
	// clears the moves (it may be the move's source or target too).
	RoleMetaLeader Role = "meta-leader"
)

// roles are the roles KillMidMove draws, in a fixed order.
var roles = []Role{RoleSource, RoleTarget, RoleMetaLeader}

// Failpoints are the durability failpoints of internal/failpoint that
// CrashFailpoint draws from. The retention and compaction points are left
// out: the nemesis workloads keep no topic with retention or compaction.
var Failpoints = []string{"logSegmentWrite", "logFsync", "logRoll", "fsmSnapshotPersist", "logInstall"}

// failTerms are the gofail terms CrashFailpoint draws: a panic on the
// first or third pass, or on one pass in twenty. gofail reads a
// probability only as a float ("5.0%"): "5%" fails to parse and the node
// would start without its failpoint.
var failTerms = []string{"1*panic", "2*off->panic", "5.0%panic"}

// kindSpec is how long a fault of a kind lasts, and whether it needs the
// proxies.
type kindSpec struct {
	min, max time.Duration
	network  bool
	// restarts: the fault restarts nodes with fault settings
	// (Processes.RestartEnv) or changes membership (Members).
	restarts bool
	// moves: the fault starts replica moves (Moves), so it needs a
	// cluster with data groups on more nodes than their replication
	// factor.
	moves bool
}

// kinds is the table of fault kinds. A pause outlasts Raft's heartbeat,
// election and lease timeouts (a few hundred milliseconds by default,
// replication/raft_stores.go) several times, so the others elect a new
// leader while the paused one still believes it leads.
var kinds = map[Kind]kindSpec{
	KillLeader:    {min: 500 * time.Millisecond, max: 4 * time.Second},
	KillRandom:    {min: 500 * time.Millisecond, max: 4 * time.Second},
	KillMajority:  {min: 1 * time.Second, max: 4 * time.Second},
	PauseLeader:   {min: 2500 * time.Millisecond, max: 6 * time.Second},
	PauseMinority: {min: 2500 * time.Millisecond, max: 6 * time.Second},
	IsolateLeader: {min: 2 * time.Second, max: 7 * time.Second, network: true},
	Split:         {min: 2 * time.Second, max: 7 * time.Second, network: true},
	Bridge:        {min: 2 * time.Second, max: 7 * time.Second, network: true},
	OneWay:        {min: 2 * time.Second, max: 7 * time.Second, network: true},
	Slow:          {min: 2 * time.Second, max: 7 * time.Second, network: true},
	// A power cut is short: the cluster is down for all of it.
	PowerCutAll: {min: 500 * time.Millisecond, max: 3 * time.Second},
	// The others leave the node time to reach its point, or to run slow
	// or off-clock through elections, lease expiries and snapshots.
	CrashFailpoint: {min: 3 * time.Second, max: 8 * time.Second, restarts: true},
	SlowDisk:       {min: 3 * time.Second, max: 8 * time.Second, restarts: true},
	ClockOffset:    {min: 3 * time.Second, max: 8 * time.Second, restarts: true},
	Membership:     {min: 3 * time.Second, max: 8 * time.Second, restarts: true},
	// How long the node stays dead once a move was seen in flight (the
	// wait for one, up to Runner.MoveWait, comes before): long enough for the
	// meta leader to act on it, a new meta leader to be elected, or a
	// short dead-node timeout to pass.
	KillMidMove: {min: 2 * time.Second, max: 6 * time.Second, moves: true},
}

// MaxClockOffset bounds the offset a ClockOffset fault draws, either way.
const MaxClockOffset = 3 * time.Second

// AllKinds lists every kind, in a fixed order.
func AllKinds() []Kind {
	out := make([]Kind, 0, len(kinds))
	for k := range kinds {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// NeedsNet reports whether a fault of kind k acts on the proxies.
func (k Kind) NeedsNet() bool { return kinds[k].network }

// Restarts reports whether a fault of kind k restarts nodes with fault
// settings or changes the membership.
func (k Kind) Restarts() bool { return kinds[k].restarts }

// NeedsMoves reports whether a fault of kind k starts replica moves
// (Runner.Moves).
func (k Kind) NeedsMoves() bool { return kinds[k].moves }

// ParseKinds parses a comma-separated list of kinds; "all" is every kind.
func ParseKinds(s string) ([]Kind, error) {
	if s == "all" {
		return AllKinds(), nil
	}
	var out []Kind
	for _, name := range strings.Split(s, ",") {
		k := Kind(strings.TrimSpace(name))
		if _, ok := kinds[k]; !ok {
			return nil, fmt.Errorf("nemesis: unknown fault kind %q (want one of %v)", k, AllKinds())
		}
		out = append(out, k)
	}
	return out, nil
}

// Fault is one fault, with everything random about it already drawn.
type Fault struct {
	Kind Kind
	// Order is a permutation of the node indexes; a fault takes the nodes
	// it needs from its front (the node killed, the minority, the bridge).
	Order []int
	// Leader, for OneWay, makes the leader the node whose outgoing links
	// suffer (otherwise Order[0]); All makes them all suffer (otherwise
	// only the one to the next node of Order).
	Leader, All bool
	// Link is what a network fault does to the links it picks: a cut in
	// some mode (IsolateLeader, Split, Bridge, OneWay), a loss (OneWay),
	// or latency and jitter (Slow).
	Link Link
	// Point and Term are CrashFailpoint's failpoint and gofail term.
	Point, Term string
	// Delay and Jitter are SlowDisk's added sync time (Leader: the
	// leader's disk, otherwise Order[0]'s).
	Delay, Jitter time.Duration
	// Offset is ClockOffset's offset of Order[0]'s clock; with Leader,
	// Order[0] is then made the leader.
	Offset time.Duration
	// Dead, for Membership, kills the follower before it is removed (a
	// dead node replaced); otherwise it runs on, removed, until it is
	// added back.
	Dead bool
	// Role is which node of a move in flight KillMidMove kills. It
	// drains the first node of Order that holds replicas; among the nodes
	// of the role, it kills the first in Order.
	Role Role
}

// Env is the environment (KEY=VALUE) a fault restarts its node with.
func (f Fault) Env() []string {
	switch f.Kind {
	case CrashFailpoint:
		return []string{"GOFAIL_FAILPOINTS=" + f.Point + "=" + f.Term}
	case SlowDisk:
		return []string{fmt.Sprintf("LOGD_FAULT_SLOW_FSYNC=%v,%v", f.Delay, f.Jitter)}
	case ClockOffset:
		return []string{fmt.Sprintf("LOGD_FAULT_CLOCK_OFFSET=%v", f.Offset)}
	}
	return nil
}

// Step is one fault of a schedule, with its times from the run's start.
type Step struct {
	// At is when the fault starts, For how long it lasts.
	At, For time.Duration
	Fault
}

func (s Step) String() string {
	extra := ""
	switch {
	case s.Kind == OneWay:
		from, to := "node", "one peer"
		if s.Leader {
			from = "leader"
		}
		if s.All {
			to = "all peers"
		}
		extra = fmt.Sprintf(" %s -> %s: %v", from, to, s.Link)
	case s.Kind.NeedsNet():
		extra = " " + s.Link.String()
	case s.Kind == SlowDisk && s.Leader:
		extra = " leader " + strings.Join(s.Env(), " ")
	case s.Kind == ClockOffset && s.Leader:
		extra = " " + strings.Join(s.Env(), " ") + " made leader"
	case s.Kind == Membership:
		extra = " live"
		if s.Dead {
			extra = " dead"
		}
	case s.Kind == KillMidMove:
		extra = " kill the " + string(s.Role)
	case len(s.Env()) > 0:
		extra = " " + strings.Join(s.Env(), " ")
	}
	return fmt.Sprintf("t+%v %s for %v order %v%s", s.At.Round(time.Millisecond), s.Kind, s.For.Round(time.Millisecond), s.Order, extra)
}

// Schedule is a replayable list of faults: the same seed, size, duration
// and kinds give the same schedule.
type Schedule struct {
	Seed  uint64
	Nodes int
	Steps []Step
}

func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, %d nodes, %d faults", s.Seed, s.Nodes, len(s.Steps))
	for _, st := range s.Steps {
		b.WriteString("\n  ")
		b.WriteString(st.String())
	}
	return b.String()
}

// Calm periods between faults, so the cluster heals and the workload
// makes progress before the next fault.
const (
	minCalm = 1 * time.Second
	maxCalm = 3 * time.Second
)

// NewSchedule draws faults of the given kinds from seed, one at a time
// with a calm period before each, until total is used up. Every fault
// ends by total. nodes is the cluster's size (at least 2).
func NewSchedule(seed uint64, nodes int, total time.Duration, ks []Kind) (Schedule, error) {
	if nodes < 2 {
		return Schedule{}, fmt.Errorf("nemesis: a schedule needs at least 2 nodes, got %d", nodes)
	}
	if len(ks) == 0 {
		return Schedule{}, fmt.Errorf("nemesis: a schedule needs at least one kind of fault")
	}
	for _, k := range ks {
		if _, ok := kinds[k]; !ok {
			return Schedule{}, fmt.Errorf("nemesis: unknown fault kind %q", k)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x6c6f6764)) // "logd"
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	s := Schedule{Seed: seed, Nodes: nodes}
	at := time.Duration(0)
	for {
		at += between(minCalm, maxCalm)
		k := ks[rng.IntN(len(ks))]
		spec := kinds[k]
		d := between(spec.min, spec.max)
		if at+d > total {
			break
		}
		f := Fault{Kind: k, Order: rng.Perm(nodes)}
		switch k {
		case IsolateLeader, Split, Bridge:
			f.Link.Cut = Refuse + CutMode(rng.IntN(2)) // Refuse or Blackhole
		case OneWay:
			f.Leader, f.All = rng.IntN(2) == 0, rng.IntN(2) == 0
			if loss := []float64{0.05, 0.2, 0.5, 1}[rng.IntN(4)]; loss < 1 {
				f.Link.Loss = loss
			} else {
				f.Link.Cut = Refuse + CutMode(rng.IntN(2))
			}
		case Slow:
			f.Link.Latency = between(5*time.Millisecond, 150*time.Millisecond)
			f.Link.Jitter = between(0, f.Link.Latency)
		case CrashFailpoint:
			f.Point, f.Term = Failpoints[rng.IntN(len(Failpoints))], failTerms[rng.IntN(len(failTerms))]
		case SlowDisk:
			f.Leader = rng.IntN(2) == 0
			f.Delay = between(5*time.Millisecond, 100*time.Millisecond).Round(time.Millisecond)
			f.Jitter = between(0, f.Delay).Round(time.Millisecond)
		case ClockOffset:
			f.Offset = between(500*time.Millisecond, MaxClockOffset).Round(time.Millisecond)
			if rng.IntN(2) == 0 {
				f.Offset = -f.Offset
			}
			f.Leader = rng.IntN(2) == 0
		case Membership:
			f.Dead = rng.IntN(2) == 0
		case KillMidMove:
			f.Role = roles[rng.IntN(len(roles))]
		}
		s.Steps = append(s.Steps, Step{At: at, For: d, Fault: f})
		at += d
	}
	return s, nil
}
