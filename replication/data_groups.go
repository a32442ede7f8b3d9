package replication

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/internal/slogbridge"
	"github.com/logd-dev/logd/log"
	"github.com/logd-dev/logd/replication/catchup"
	"github.com/logd-dev/logd/replication/cleaner"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/observe"
	"github.com/logd-dev/logd/replication/placement"
	"github.com/logd-dev/logd/replication/raftstore"
	"github.com/logd-dev/logd/replication/transport"
)

// Data groups (docs/architecture.md, "Data groups"). Beside its meta group
// (the Raft group every member holds: today's group, which keeps every
// partition made before data groups) a node runs a replica of each data
// group the meta group's table (fsm.DataGroupTable) lists it in: a Raft
// group of its own, on the same Raft port (transport.Port.Group), with
// its own Raft stores and state machine under DataDir/groups/g<id>/.
//
// The table is desired state; the nodes converge on it:
//
//   - The meta leader places: each member of the meta group's
//     configuration that the table has not placed yet is placed as it
//     would have been had it joined (placement.Join fills every group
//     below the replication factor with it), and DataGroupsPerNode new
//     groups are added over the nodes (placement.Grow), in one
//     data-groups command based on the table's epoch.
//   - Every node opens the groups that list it. A group's first replicas
//     (DataGroup.Bootstrap) start it together with that configuration;
//     a replica added later starts empty and waits for the group's
//     leader.
//   - The leader of a group adds a listed node as a non-voter, promotes
//     it once it holds the leader's committed entries, removes a node the
//     table no longer lists, and hands the leadership to the preferred
//     leader (the first replica) once that one has caught up.

// Defaults of data groups.
const (
	// DefaultReplicationFactor is Config.ReplicationFactor's default.
	DefaultReplicationFactor = 3
	// DefaultDataGroupsPerNode is logd's --data-groups-per-node default
	// (Config.DataGroupsPerNode's zero value is none): chosen from the
	// measurements of docs/performance.md, "Data groups by default".
	DefaultDataGroupsPerNode = 4
	// MaxDataGroupsPerNode bounds Config.DataGroupsPerNode: every group
	// costs heartbeats and goroutines on each of its replicas
	// (docs/performance.md, "Raft groups").
	MaxDataGroupsPerNode = 64
	// dataGroupWALSegment is a data group's raft-wal segment: raft-wal
	// allocates each segment in full, and an idle group's log needs
	// little (docs/performance.md, "Raft groups").
	dataGroupWALSegment = 4 << 20
	// dataGroupRecentShare divides Config.RecentLogBytes for each data
	// group replica's cache of its newest Raft entries (4 MiB by
	// default, a segment's worth): a node runs tens of them, and each
	// group carries a share of the node's writes.
	dataGroupRecentShare = 4
	// dataGroupTick is how often a node looks at the table and at the
	// groups it leads.
	dataGroupTick = 250 * time.Millisecond
	// dataGroupChangeTimeout bounds one configuration change of a group.
	dataGroupChangeTimeout = 10 * time.Second
	// dataGroupTransferPause spaces leadership transfers of one group to
	// its preferred leader.
	dataGroupTransferPause = 10 * time.Second
)

// dataGroups runs this node's replicas of data groups (see above).
type dataGroups struct {
	n    *Node
	stop chan struct{}
	done chan struct{}

	// lastPlaceErr is the text of place's last error (the runner's
	// goroutine only).
	lastPlaceErr string
	// keptSingle is set once place logged that the cluster keeps its
	// topics in the meta group (dataGroupsPerNode; the runner's
	// goroutine only).
	keptSingle bool
	// moving is the replica move this node proposed last, while it may
	// be in flight (the runner's goroutine only; nil: none).
	moving *pendingMove
	// leaderTerm and leaderSince are the meta group's term this node
	// last placed in and when it first did (the runner's goroutine only):
	// a member not heard from in this term counts as silent since then.
	leaderTerm  uint64
	leaderSince time.Time

	// leftSince is when this node first saw each group it runs a replica
	// or keeps a directory of, and the table does not list it in
	// (retire.go; the runner's goroutine only).
	leftSince map[uint64]time.Time
	// lastRetire is when retireLeft last ran (the runner's goroutine
	// only).
	lastRetire time.Time

	mu sync.Mutex
	// open are the groups this node runs, by id; guarded by mu.
	open map[uint64]*dataGroup

	// startGroups are the groups this node held a replica of when it
	// started (their directories) and the table listed it in when its
	// meta group first caught up, and startSince is when that was (the
	// runner's goroutine only). startServing is set once each of them
	// caught up with its group, or startGroupsWait passed (Node.Ready).
	startGroups  []uint64
	startSince   time.Time
	startServing atomic.Bool
}

// startGroupsWait bounds how long a node that started waits, before it
// reports ready, for the data group replicas it held to catch up: one
// whose group lost its majority would otherwise keep the node from ever
// serving its other groups and its meta group. Their reads go to the
// other replicas meanwhile.
const startGroupsWait = 30 * time.Second

// noteStartServing sets startServing once every replica this node held
// at its start, and the table lists, caught up with its group, or
// startGroupsWait passed since its meta group first caught up. A single
// node, every group's only replica, would otherwise report ready and
// answer its groups' reads and writes with errors until each group had
// elected it.
func (d *dataGroups) noteStartServing(tab fsm.DataGroupTable) {
	if d.startServing.Load() {
		return
	}
	self := d.n.cfg.NodeID
	if d.startSince.IsZero() {
		d.startSince = time.Now()
		for _, id := range d.groupDirs() {
			if slices.ContainsFunc(tab.Groups, func(g fsm.DataGroup) bool { return g.ID == id && slices.Contains(g.Replicas, self) }) {
				d.startGroups = append(d.startGroups, id)
			}
		}
	}
	var behind []uint64
	for _, id := range d.startGroups {
		dg := d.n.dataGroup(id)
		if dg != nil {
			dg.noteCaughtUp()
		}
		if dg == nil || !dg.caughtUp.Load() {
			behind = append(behind, id)
		}
	}
	switch {
	case len(behind) == 0:
		if len(d.startGroups) > 0 {
			d.n.cfg.Logger.Info("data group replicas caught up; serving", "groups", d.startGroups)
		}
	case time.Since(d.startSince) > startGroupsWait:
		d.n.cfg.Logger.Warn("serving before these data group replicas caught up; their groups are read from other replicas", "groups", behind, "waited", startGroupsWait)
	default:
		return
	}
	d.startServing.Store(true)
}

// dataGroup is one replica of a data group.
type dataGroup struct {
	id      uint64
	raft    *raft.Raft
	fsm     *fsm.FSM
	stores  *raftStores
	applied *appliedSignal
	// bootstrapped is set when this node started the group with its
	// bootstrap configuration as it opened it (mayBootstrap).
	bootstrapped bool
	// lastTransfer is when this node last handed the group's leadership
	// to its preferred leader (the runner's goroutine only).
	lastTransfer time.Time
	// handOverFailed counts the failed hand-overs of an unlisted
	// leader's leadership (handOver): each next one tries the next voter
	// the table lists.
	handOverFailed atomic.Uint32
	// adoptMu orders adopt's passes over the group.
	adoptMu sync.Mutex
	// caughtUp is set once the replica caught up with its group as a
	// node's meta group does before it serves (Node.caughtUp): a leader
	// once its barrier is applied, a follower once its state machine
	// applied the commit index its leader sent it after it opened, and
	// its own commit index, of the current term. From then on it serves
	// reads (before, a node reads the group's partitions from another
	// replica, so a replica that opens and replays never answers older
	// than the group did before it opened).
	caughtUp atomic.Bool
	// commits is the leader's commit index as this replica heard it
	// (observe.LeaderCommits), noted by its Raft transport's wrapper.
	commits *observe.LeaderCommits
	// obs holds what each follower last answered this replica while it
	// leads the group (its transport wrapper notes it): Kafka's in-sync
	// replicas of the group's partitions (Node.dataGroupStatus).
	obs *observe.Metrics
	// forwardStop stops the wrapper's Forward once Raft has shut down;
	// forwardDone is closed when it returned.
	forwardStop, forwardDone chan struct{}
	// left is set while the table does not list this node as a replica
	// of the group (moved away, drained, evacuated): its state stops
	// where the group removed it, so reads go to the group's replicas.
	// The replica keeps running; listed again, it is added back and
	// catches up.
	left atomic.Bool
	// barrierTerm is the term in which this replica, as leader, applied
	// a barrier: it has applied everything committed before, and may
	// answer as the group's leader from its state (Node.Ready's rule, per
	// group).
	barrierTerm atomic.Uint64
	// appends coalesces the group's appends on its leader (coalesce.go).
	appends coalescer
	// cleaner is the replica's retention and compaction scheduler
	// (group_cleaner.go); cleanerStop ends its loop, and cleanerDone is
	// closed once it returned.
	cleaner     *cleaner.Cleaner
	cleanerStop context.CancelFunc
	cleanerDone chan struct{}
	// housekeepingStop ends the replica's housekeeping loop
	// (group_housekeeping.go), which closes housekeepingDone when it
	// returns.
	housekeepingStop, housekeepingDone chan struct{}
}

// noteCaughtUp sets caughtUp once the replica caught up with its group:
// it leads and applied a barrier of its term, or it follows and
// followerCaughtUp.
func (dg *dataGroup) noteCaughtUp() {
	if dg.caughtUp.Load() {
		return
	}
	if dg.leadsReady() || dg.followerCaughtUp() {
		dg.caughtUp.Store(true)
	}
}

// followerCaughtUp is Node.caughtUp's rule for a follower, on this
// replica: it knows a leader, its state machine applied the commit index
// the first AppendEntries of the current term it received carried (the
// leader's, taken after the replica opened), and its own commit index,
// once that is an entry of the leader's term.
//
// Its own commit index alone says little: hashicorp/raft cuts the
// leader's to the last entry the replica holds (and the transport's
// wrapper to the request's last entry, observe.clampCommit), so a replica
// that catches up in batches of MaxAppendEntries reaches "its" commit
// index after each one. Raft's applied index says less: it counts what
// Raft handed the state machine, which may not have applied it yet. A
// replica restarted behind its group that served then would answer ends
// below what the group committed, and served, before it opened; its own
// node's read floors went with the process, and another node that asks it
// over the Raft port may have none yet either (the nemesis run of seed
// 1796626726345076957: a read through a node just restarted answered end
// 112 by another node's replica just restarted too, where it had answered
// 115 before).
func (dg *dataGroup) followerCaughtUp() bool {
	if dg.raft.State() != raft.Follower {
		return false
	}
	if addr, _ := dg.raft.LeaderWithID(); addr == "" {
		return false
	}
	term := dg.raft.CurrentTerm()
	if heard, ok := dg.commits.In(term); !ok || !appliedThrough(dg.fsm, dg.stores.logs, heard) {
		return false
	}
	commit := dg.raft.CommitIndex()
	if commit == 0 || !appliedThrough(dg.fsm, dg.stores.logs, commit) {
		return false
	}
	return entryTerm(dg.raft, dg.stores.logs, commit) == term
}

// shutdown stops the replica: its Raft, the wrapper's forwarding, its
// transport and stores, and its state machine.
func (dg *dataGroup) shutdown() error {
	dg.stopCleaner()
	dg.stopHousekeeping()
	errs := []error{dg.stores.shutdownRaft(dg.raft)}
	close(dg.forwardStop)
	<-dg.forwardDone
	// Raft's transport keeps its pooled connections open after Close,
	// each with a reader goroutine.
	dg.stores.transport.(*raft.NetworkTransport).CloseStreams()
	errs = append(errs, dg.stores.close(), dg.fsm.Close())
	return errors.Join(errs...)
}

// serves reports whether reads may use this replica: it caught up with its
// group, the table lists this node as one of its replicas, and it is in
// touch with its group (inContact).
func (dg *dataGroup) serves() bool {
	dg.noteCaughtUp()
	return dg.caughtUp.Load() && !dg.left.Load() && dg.inContact()
}

// servesNow is serves, after applying a barrier of the current term
// first when this replica leads its group without one yet (a group just
// created or a leader just elected, before the runner's next pass): it
// then holds every committed write, and a read need not fail for want
// of another replica. A leader the table no longer lists (it is handing
// its leadership to a listed replica) serves too once it applied its
// barrier: while it leads it holds every write, and its followers may
// not have applied the last ones yet (they learn the commit index from
// its next append), so sending its reads to them could show a write it
// acknowledged as missing.
func (d *dataGroups) servesNow(dg *dataGroup) bool {
	if dg.serves() {
		return true
	}
	if dg.raft.State() != raft.Leader {
		return false
	}
	if !dg.leadsReady() {
		d.barrier(dg)
	}
	if dg.left.Load() {
		return dg.leadsReady()
	}
	return dg.serves()
}

// contactBound is how long a follower replica serves reads after it last
// heard from its group's leader. A replica cut off from its group, or
// removed from the group's configuration while the table still lists it
// (a move that has not finished), stops there and reads go to the other
// replicas, rather than answering, for as long as it lasts, what it had
// when it lost touch. A healthy follower hears from the leader at every
// heartbeat (a tenth of the heartbeat timeout).
const contactBound = 2 * time.Second

// inContact reports whether this replica leads its group or heard from
// its leader within contactBound.
func (dg *dataGroup) inContact() bool {
	if dg.raft.State() == raft.Leader {
		return true
	}
	lc := dg.raft.LastContact()
	return !lc.IsZero() && time.Since(lc) < contactBound
}

// leadsReady reports whether this replica leads its group and applied a
// barrier of its term.
func (dg *dataGroup) leadsReady() bool {
	return dg.raft.State() == raft.Leader && dg.barrierTerm.Load() == dg.raft.CurrentTerm()
}

// newDataGroups is n's runner of data groups, not started.
func newDataGroups(n *Node) *dataGroups {
	return &dataGroups{n: n, stop: make(chan struct{}), done: make(chan struct{}), open: map[uint64]*dataGroup{}, leftSince: map[uint64]time.Time{}}
}

// startDataGroups starts the runner of data groups; without a Raft port
// (InMemory) there are none.
func (n *Node) startDataGroups() {
	if n.stores.port == nil {
		n.data.startServing.Store(true)
		close(n.data.done)
		return
	}
	go n.data.run()
}

// run converges on the table until close.
func (d *dataGroups) run() {
	defer close(d.done)
	t := time.NewTicker(dataGroupTick)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		d.step()
	}
}

// step is one pass: place (on the meta leader), open what the table lists
// here, and converge the groups this node leads.
func (d *dataGroups) step() {
	n := d.n
	if !n.metaReady() {
		return
	}
	if n.IsLeader() {
		// A refusal repeats every tick while its cause lasts: it is
		// logged when it changes.
		err := d.place()
		if msg := fmt.Sprint(err); err != nil && msg != d.lastPlaceErr {
			n.cfg.Logger.Warn("place data groups", "err", err)
		}
		d.lastPlaceErr = fmt.Sprint(err)
	}
	tab := n.fsm.DataGroups()
	self := n.cfg.NodeID
	if n.IsLeader() {
		d.healUnlisted(tab)
	}
	var unlisted []*dataGroup
	d.mu.Lock()
	for id, dg := range d.open {
		left := !slices.ContainsFunc(tab.Groups, func(g fsm.DataGroup) bool { return g.ID == id && slices.Contains(g.Replicas, self) })
		dg.left.Store(left)
		if left && dg.raft.State() == raft.Leader {
			unlisted = append(unlisted, dg)
		}
	}
	d.mu.Unlock()
	// A group this node leads though the table moved it away (evacuated,
	// drained, balanced): it still converges the group, adding the listed
	// replicas, and hands the leadership to the preferred one, which
	// then drops this replica.
	for _, dg := range unlisted {
		for _, g := range tab.Groups {
			if g.ID == dg.id {
				d.barrier(dg)
				d.converge(dg, g)
			}
		}
	}
	for _, g := range tab.Groups {
		if !slices.Contains(g.Replicas, self) {
			continue
		}
		dg, err := d.openGroup(g)
		if err != nil {
			n.cfg.Logger.Error("open data group", "group", g.ID, "err", err)
			continue
		}
		dg.noteCaughtUp()
		if dg.raft.State() == raft.Leader {
			d.barrier(dg)
			d.converge(dg, g)
			d.adopt(dg)
		}
	}
	d.noteStartServing(tab)
	if time.Since(d.lastRetire) >= retireEvery {
		d.lastRetire = time.Now()
		d.retireLeft(tab)
	}
}

// healUnlisted hands each group whose leader the table no longer lists (a
// node removed from the cluster, which may no longer learn the table from
// the meta group) the table's entry for the group, through this node's
// replica of it: that leader hands its leadership to a listed voter
// (handOver), which converges the group on the table and so removes it.
func (d *dataGroups) healUnlisted(tab fsm.DataGroupTable) {
	n := d.n
	for _, g := range tab.Groups {
		dg := n.dataGroup(g.ID)
		if dg == nil {
			continue
		}
		// The leader's address from the group's configuration: the meta
		// group's no longer lists a removed node.
		addr, leader := dg.raft.LeaderWithID()
		if leader == "" || slices.Contains(g.Replicas, string(leader)) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
		g := g
		ans, err := n.callGroupAt(ctx, addr, string(leader), g.ID, groupCall{Kind: callConverge, Converge: &g})
		cancel()
		if err == nil && ans.Err != nil {
			err = ans.Err.decode()
		}
		if err != nil {
			n.cfg.Logger.Warn("hand a data group's placement to its unlisted leader", "group", g.ID, "leader", leader, "err", err)
		}
	}
}

// handOver hands the leadership of dg, which this node leads though g (the
// table's entry, from the meta leader) does not list it, to a voter g
// lists, the preferred one first; the addresses are the group's own.
func (d *dataGroups) handOver(dg *dataGroup, g fsm.DataGroup) error {
	cf := dg.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return err
	}
	var voters []raft.Server
	for _, id := range g.Replicas {
		for _, s := range cf.Configuration().Servers {
			if string(s.ID) == id && s.Suffrage == raft.Voter && id != d.n.cfg.NodeID {
				voters = append(voters, s)
			}
		}
	}
	if len(voters) == 0 {
		return fmt.Errorf("data group %d: no voter the table lists to hand the leadership to", g.ID)
	}
	// After a failed hand-over the next voter is tried: one that cannot
	// take the leadership (down, or never catching up) would otherwise
	// be asked again and again, and the group refuses writes while a
	// transfer is in progress.
	s := voters[int(dg.handOverFailed.Load())%len(voters)]
	if err := dg.raft.LeadershipTransferToServer(s.ID, s.Address).Error(); err != nil {
		if !errors.Is(err, raft.ErrLeadershipTransferInProgress) { // another call's transfer
			dg.handOverFailed.Add(1)
		}
		return fmt.Errorf("hand data group %d to %s: %w", g.ID, s.ID, err)
	}
	d.n.cfg.Logger.Info("handed an unlisted replica's leadership to a listed voter", "group", g.ID, "node", s.ID)
	return nil
}

// place proposes the table with every member placed (see above), when the
// cluster is at DataGroupLevel and DataGroupsPerNode is set; nothing when
// the table is already so.
func (d *dataGroups) place() error {
	n := d.n
	tab := n.fsm.DataGroups()
	perNode := n.dataGroupsPerNode(tab)
	if perNode == 0 && len(tab.Groups) == 0 {
		if n.cfg.DataGroupsPerNode > 0 && !d.keptSingle {
			d.keptSingle = true
			n.cfg.Logger.Info("this cluster keeps its topics in the meta group and starts no data groups: it holds topics and has none, and --data-groups-per-node is not set (docs/operations.md, \"Data groups\")")
		}
		return nil
	}
	if level, err := n.featureLevel(); err != nil || level < fsm.DataGroupLevel {
		return err
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return err
	}
	if done, err := d.settleMoves(tab); err != nil || done {
		return err // the next pass plans on the table without them
	}
	dead := d.deadNodes(cf.Configuration().Servers)
	// Drained nodes are to hold no replica either; unlike a dead node's,
	// their absence is the operator's choice and is not logged as one.
	out := slices.Concat(dead, tab.Draining)
	// Evacuate places by bytes: the groups' sizes, while an out node
	// holds a replica (balancing asks for them on the other passes).
	var sizes map[uint64]int64
	if slices.ContainsFunc(tab.Groups, func(g fsm.DataGroup) bool {
		return slices.ContainsFunc(g.Replicas, func(r string) bool { return slices.Contains(out, r) })
	}) {
		sizes = n.groupSizes(context.Background(), tab)
	}
	set, why, err := plan(tab, cf.Configuration().Servers, perNode, n.cfg.ReplicationFactor, out, dead, sizes)
	if err != nil {
		return err
	}
	if why == "" {
		// Balancing moves nothing while a member is silent: a node that
		// died after its replicas were rebuilt elsewhere holds none, and
		// would look to a new meta leader, until its dead-node timeout
		// counts again from the new term, like an empty node to give
		// replicas to. Moves to it would never finish.
		return d.balance(tab, slices.Concat(out, d.silentNodes(cf.Configuration().Servers)))
	}
	if len(dead) > 0 {
		n.cfg.Logger.Warn("rebuilding the data group replicas of members not heard from", "nodes", dead, "for", n.cfg.DeadNodeTimeout)
	}
	if err := d.proposeTable(tab, set, why); err != nil {
		return err
	}
	n.cfg.Logger.Info("placed data groups", "groups", len(set.Groups), "nodes", set.Nodes)
	return nil
}

// dataGroupsPerNode is how many data groups each member adds as this node
// places them over tab: Config.DataGroupsPerNode, but none when that is a
// default (Config.DataGroupsPerNodeIsDefault) and the cluster holds
// topics but no data groups, so a cluster from before data groups, or
// run without them, stays as it was until an operator sets the flag.
// Every node decides it from the same replicated state, so a new meta
// leader decides as the last one did.
func (n *Node) dataGroupsPerNode(tab fsm.DataGroupTable) int {
	if n.cfg.DataGroupsPerNodeIsDefault && len(tab.Groups) == 0 {
		if topics, _ := n.fsm.TopicCounts(); topics > 0 {
			return 0
		}
	}
	return n.cfg.DataGroupsPerNode
}

// DefaultDeadNodeTimeout is Config.DeadNodeTimeout's default, as
// CockroachDB's time_until_store_dead.
const DefaultDeadNodeTimeout = 5 * time.Minute

// deadNodes are the members of servers the meta leader (this node) has
// not heard from for Config.DeadNodeTimeout: not since its last answer,
// or, for one that has not answered in this term, since this node began
// placing in it.
func (d *dataGroups) deadNodes(servers []raft.Server) []string {
	n := d.n
	if n.cfg.DeadNodeTimeout <= 0 {
		return nil
	}
	if term := n.raft.CurrentTerm(); term != d.leaderTerm {
		d.leaderTerm, d.leaderSince = term, time.Now()
	}
	var out []string
	for _, f := range n.observer.Get(n.cfg.NodeID, servers, 0).Followers {
		last := f.LastContact
		if last.Before(d.leaderSince) {
			last = d.leaderSince
		}
		if time.Since(last) > n.cfg.DeadNodeTimeout {
			out = append(out, f.ID)
		}
	}
	return out
}

// silentAfter is how long the meta leader goes without hearing a member
// before balancing stops counting it as live.
const silentAfter = 5 * time.Second

// silentNodes are the members of servers the meta leader (this node) has
// not heard from in this term, or not for silentAfter.
func (d *dataGroups) silentNodes(servers []raft.Server) []string {
	var out []string
	for _, f := range d.n.observer.Get(d.n.cfg.NodeID, servers, 0).Followers {
		if f.LastContact.IsZero() || time.Since(f.LastContact) > silentAfter {
			out = append(out, f.ID)
		}
	}
	return out
}

// plan returns the table with every voter of servers placed in the order
// the configuration lists them (each joins, then perNode groups are
// added), the replicas of placed nodes in out (members not heard from,
// those of them in silent, and drained ones) given to the others
// (placement.Evacuate, by the groups' sizes: bytes by group, a group left
// out counting 0), and why that changed anything ("" when it did not).
func plan(tab fsm.DataGroupTable, servers []raft.Server, perNode, rf int, out, silent []string, sizes map[uint64]int64) (fsm.DataGroupsSet, string, error) {
	p := planOf(tab)
	nodes := slices.Clone(tab.Nodes)
	var why []string
	// A placed node that left the configuration (removed by an operator,
	// or by the membership changes of a join) gives its replicas to the
	// nodes that remain: each group that held it gets another node in its
	// place, which the group's leader adds, lets catch up and promotes
	// before it removes the one that left (converge).
	for _, id := range tab.Nodes {
		if slices.ContainsFunc(servers, func(s raft.Server) bool { return string(s.ID) == id }) {
			continue
		}
		nodes = slices.DeleteFunc(nodes, func(n string) bool { return n == id })
		if len(nodes) == 0 {
			return fsm.DataGroupsSet{}, "", fmt.Errorf("every placed node left; %s last", id)
		}
		var err error
		if p, err = placement.Remove(p, nodes, id, rf); err != nil {
			return fsm.DataGroupsSet{}, "", fmt.Errorf("move the replicas of node %s, which left: %w", id, err)
		}
		why = append(why, "node "+id+" removed")
	}
	for _, s := range servers {
		id := string(s.ID)
		if s.Suffrage != raft.Voter || slices.Contains(nodes, id) {
			continue
		}
		nodes = append(nodes, id)
		var err error
		if p, err = placement.Join(p, nodes, id, rf); err != nil {
			return fsm.DataGroupsSet{}, "", fmt.Errorf("place node %s: %w", id, err)
		}
		// New groups on live nodes, when every replica already is.
		grow := slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return slices.Contains(out, n) })
		if placement.Check(p, grow, rf) != nil {
			grow = nodes
		}
		if p, err = placement.Grow(p, grow, perNode, rf); err != nil {
			return fsm.DataGroupsSet{}, "", fmt.Errorf("add the groups of node %s: %w", id, err)
		}
		why = append(why, "node "+id+" joined")
	}
	// The replicas of dead and drained members go to the others, the
	// nodes that just joined among them.
	var leave []string
	for _, id := range out {
		if slices.Contains(nodes, id) {
			leave = append(leave, id)
		}
	}
	if len(leave) > 0 && len(p) > 0 {
		withSizes(p, sizes)
		q, moved, err := placement.Evacuate(p, nodes, leave, rf)
		if err != nil {
			return fsm.DataGroupsSet{}, "", fmt.Errorf("move the replicas of %v, not heard from or drained: %w", leave, err)
		}
		if moved {
			p = q
			for _, id := range leave {
				if slices.Contains(silent, id) {
					why = append(why, "node "+id+" not heard from")
				} else {
					why = append(why, "node "+id+" drained")
				}
			}
		}
	}
	return setOf(tab, nodes, p), strings.Join(why, ", "), nil
}

// proposeTable proposes set, made from tab for the reason why, into the
// meta group, with each group whose replicas it changes marked as moving
// (once the cluster is at fsm.MovesLevel).
func (d *dataGroups) proposeTable(tab fsm.DataGroupTable, set fsm.DataGroupsSet, why string) error {
	n := d.n
	now := n.cfg.Now()
	if level, err := n.featureLevel(); err == nil && level >= fsm.MovesLevel {
		markMoves(tab, set.Groups, why, now.UnixNano())
	}
	data, err := fsm.EncodeDataGroups(now.UnixNano(), set)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
	defer cancel()
	_, err = n.propose(ctx, data)
	return err
}

// markMoves marks each group of next whose replicas differ from tab's
// as moving, for the reason why at now, merged with a move it already
// had: replicas it gains and loses, since the first change the group has
// not finished. A group whose replicas next leaves alone keeps its mark;
// a new group (not in tab) is made whole, and not marked.
func markMoves(tab fsm.DataGroupTable, next []fsm.DataGroup, why string, now int64) {
	for i := range next {
		g := &next[i]
		j := slices.IndexFunc(tab.Groups, func(o fsm.DataGroup) bool { return o.ID == g.ID })
		if j < 0 {
			continue
		}
		old := tab.Groups[j]
		added := slices.DeleteFunc(slices.Clone(g.Replicas), func(id string) bool { return slices.Contains(old.Replicas, id) })
		removed := slices.DeleteFunc(slices.Clone(old.Replicas), func(id string) bool { return slices.Contains(g.Replicas, id) })
		if len(added) == 0 && len(removed) == 0 {
			g.Move = old.Move.Clone() // unchanged: still moving, or not
			continue
		}
		m := &fsm.ReplicaMove{Reason: why, Since: now}
		if prev := old.Move; prev != nil {
			m.Since = prev.Since
			added = append(prev.Added, added...)
			removed = append(prev.Removed, removed...)
		}
		m.Added = uniqueWhere(added, func(id string) bool { return slices.Contains(g.Replicas, id) })
		m.Removed = uniqueWhere(removed, func(id string) bool { return !slices.Contains(g.Replicas, id) })
		g.Move = m
	}
}

// uniqueWhere returns the distinct ids for which keep holds, sorted.
func uniqueWhere(ids []string, keep func(string) bool) []string {
	out := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return !keep(id) })
	slices.Sort(out)
	return slices.Compact(out)
}

// settleMoves clears the marks of the moves the groups finished (their
// voters are the table's replicas), in one proposal, and reports whether
// it proposed one.
func (d *dataGroups) settleMoves(tab fsm.DataGroupTable) (bool, error) {
	n := d.n
	var groups []fsm.DataGroup
	for _, g := range tab.Groups {
		if g.Move == nil || !d.moveDone(tab, g.ID) {
			continue
		}
		if groups == nil {
			groups = slices.Clone(tab.Groups)
		}
		i := slices.IndexFunc(groups, func(o fsm.DataGroup) bool { return o.ID == g.ID })
		groups[i].Move = nil
		n.cfg.Logger.Info("data group replicas moved", "group", g.ID, "added", g.Move.Added, "removed", g.Move.Removed,
			"reason", g.Move.Reason, "took", n.cfg.Now().Sub(time.Unix(0, g.Move.Since)).Round(time.Millisecond))
	}
	if groups == nil {
		return false, nil
	}
	data, err := fsm.EncodeDataGroups(n.cfg.Now().UnixNano(), fsm.DataGroupsSet{Base: tab.Epoch, Groups: groups, Nodes: tab.Nodes, Draining: tab.Draining})
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
	defer cancel()
	_, err = n.propose(ctx, data)
	return err == nil, err
}

// Balancing (docs/architecture.md, "Data groups"): the meta leader moves
// replicas toward an even load (placement.Balance), at most MaxMoves at
// once; a move counts until it finishes (the group's voters are the
// table's replicas) or for moveTimeout.
const (
	// balanceSlack is how far apart replica counts may be before a
	// replica moves: Grow and Join keep them within it.
	balanceSlack = 2
	// moveTimeout bounds the wait for one move before the next may start
	// (a move whose new replica cannot catch up, say), or twice the time
	// the move budget takes to copy the group, when longer
	// (moveTimeoutFor).
	moveTimeout = 10 * time.Minute
	// DefaultMaxMoves is Config.MaxMoves's default.
	DefaultMaxMoves = 1
)

// pendingMove is a replica move the meta leader proposed.
type pendingMove struct {
	placement.Move
	since time.Time
}

// balance proposes the next replica move, or a preferred leader handed
// over within a group, when the table is uneven and no move this node
// proposed is in flight; over the nodes not in dead, and not while a dead
// node still holds a replica no other node could take.
func (d *dataGroups) balance(tab fsm.DataGroupTable, dead []string) error {
	n := d.n
	if len(tab.Groups) == 0 || n.cfg.MaxMoves < 0 {
		return nil
	}
	// Moves in flight: at fsm.MovesLevel those the table marks (so what a
	// meta leader before this one started counts too), younger than
	// moveTimeout; below it, the one this node proposed last.
	level, err := n.featureLevel()
	if err != nil {
		return err
	}
	marked := level >= fsm.MovesLevel
	sizes := n.groupSizes(context.Background(), tab)
	if marked {
		d.moving = nil
		// A node builds every replica it gains within its one move
		// budget: a move's copy shares it with the other marked moves to
		// the same node, so it is timed on all their bytes.
		toNode := map[string]int64{}
		for _, g := range tab.Groups {
			if g.Move != nil {
				for _, id := range g.Move.Added {
					toNode[id] += sizes[g.ID]
				}
			}
		}
		inFlight := 0
		for _, g := range tab.Groups {
			if g.Move == nil {
				continue
			}
			shared := sizes[g.ID]
			for _, id := range g.Move.Added {
				shared = max(shared, toNode[id])
			}
			if n.cfg.Now().Sub(time.Unix(0, g.Move.Since)) < moveTimeoutFor(shared, n.cfg.MoveBytesPerSecond) {
				inFlight++
			}
		}
		if inFlight >= cmp.Or(n.cfg.MaxMoves, DefaultMaxMoves) {
			return nil
		}
	} else if m := d.moving; m != nil {
		if !d.moveDone(tab, m.Group) && time.Since(m.since) < moveTimeout {
			return nil
		}
		if time.Since(m.since) >= moveTimeout {
			n.cfg.Logger.Warn("data group replica move not finished; balancing goes on", "group", m.Group, "from", m.From, "to", m.To)
		} else {
			n.cfg.Logger.Info("data group replica moved", "group", m.Group, "from", m.From, "to", m.To, "took", time.Since(m.since).Round(time.Millisecond))
		}
		d.moving = nil
	}
	p := planOf(tab)
	withSizes(p, sizes)
	live := slices.DeleteFunc(slices.Clone(tab.Nodes), func(id string) bool { return slices.Contains(dead, id) })
	if len(live) == 0 || placement.Check(p, live, n.cfg.ReplicationFactor) != nil {
		return nil
	}
	q, mv, changed, err := placement.Balance(p, live, n.cfg.ReplicationFactor, balanceSlack)
	if err != nil || !changed {
		return err
	}
	if err := d.proposeTable(tab, setOf(tab, tab.Nodes, q), "balance"); err != nil {
		return err
	}
	switch {
	case mv.Back != 0:
		n.cfg.Logger.Info("swapping data group replicas to even bytes", "group", mv.Group, "from", mv.From, "to", mv.To,
			"back", mv.Back, "bytes", sizes[mv.Group], "back_bytes", sizes[mv.Back])
	case mv.Group != 0:
		n.cfg.Logger.Info("moving a data group replica", "group", mv.Group, "from", mv.From, "to", mv.To, "bytes", sizes[mv.Group])
	}
	if mv.Group != 0 {
		if !marked {
			d.moving = &pendingMove{Move: mv, since: time.Now()}
		}
	}
	return nil
}

// moveDone reports whether group g's voters are the table's replicas, by
// this node's replica of g or another replica's answer.
func (d *dataGroups) moveDone(tab fsm.DataGroupTable, g uint64) bool {
	var want []string
	for _, dg := range tab.Groups {
		if dg.ID == g {
			want = slices.Sorted(slices.Values(dg.Replicas))
		}
	}
	n := d.n
	var voters []string
	if dg := n.dataGroup(g); dg != nil && dg.raft.State() == raft.Leader {
		voters = configVoters(dg.raft)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
		defer cancel()
		err := n.askReplica(ctx, g, "", groupCall{Kind: callConfig}, func(a groupAnswer) error {
			if err := answerErr(a); err != nil {
				return fmt.Errorf("%w: %v", errNextReplica, err)
			}
			return json.Unmarshal(a.Result, &voters)
		})
		if err != nil {
			return false
		}
	}
	return slices.Equal(voters, want)
}

// configVoters are the voters of r's configuration, sorted.
func configVoters(r *raft.Raft) []string {
	var out []string
	if cf := r.GetConfiguration(); cf.Error() == nil {
		for _, s := range cf.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				out = append(out, string(s.ID))
			}
		}
	}
	slices.Sort(out)
	return out
}

// planOf is the table as a placement plan.
// withSizes sets the Bytes of p's groups from sizes.
func withSizes(p placement.Plan, sizes map[uint64]int64) {
	for i := range p {
		p[i].Bytes = sizes[p[i].ID]
	}
}

// moveTimeoutFor is how long a move of a group of size bytes counts as
// in flight: moveTimeout, or twice the time the move budget rate (bytes
// per second, Config.MoveBytesPerSecond) takes to copy it, when longer.
func moveTimeoutFor(size, rate int64) time.Duration {
	r := moveBytesPerSecond(rate)
	if r <= 0 || size <= 0 {
		return moveTimeout
	}
	return max(moveTimeout, 2*time.Duration(float64(size)/float64(r)*float64(time.Second)))
}

func planOf(tab fsm.DataGroupTable) placement.Plan {
	p := make(placement.Plan, len(tab.Groups))
	for i, g := range tab.Groups {
		p[i] = placement.Group{ID: g.ID, Replicas: slices.Clone(g.Replicas), Moving: g.Move != nil}
	}
	return p
}

// setOf is the set of the table p makes from tab (each group's bootstrap
// replicas kept, a new group's its replicas) over nodes.
func setOf(tab fsm.DataGroupTable, nodes []string, p placement.Plan) fsm.DataGroupsSet {
	boot := make(map[uint64][]string, len(tab.Groups))
	for _, g := range tab.Groups {
		boot[g.ID] = g.Bootstrap
	}
	draining := slices.DeleteFunc(slices.Clone(tab.Draining), func(id string) bool { return !slices.Contains(nodes, id) })
	set := fsm.DataGroupsSet{Base: tab.Epoch, Nodes: nodes, Draining: draining, Groups: make([]fsm.DataGroup, len(p))}
	for i, g := range p {
		b, ok := boot[g.ID]
		if !ok {
			b = g.Replicas
		}
		set.Groups[i] = fsm.DataGroup{ID: g.ID, Replicas: g.Replicas, Bootstrap: slices.Clone(b)}
	}
	return set
}

// dataGroupDir is where data group id keeps its Raft stores and state.
func dataGroupDir(dataDir string, id uint64) string {
	return filepath.Join(dataDir, "groups", "g"+strconv.FormatUint(id, 10))
}

// mayBootstrap reports whether this node, whose replica of g has no
// state, starts g with its bootstrap configuration rather than waiting for
// the group's leader to send it the log: only as one of g's bootstrap
// replicas, and only if it never held g before (no tombstone of a retired
// replica). A node that bootstrapped a group it had run and retired
// would start a second group under the group's id from the same first
// entry; two such nodes elect a leader of their own, which overwrites the
// log of a replica of the real group. A bootstrap replica that never
// opened the group may still bootstrap it late, as when the group was
// made: the group could only have run with a majority of its bootstrap
// replicas, so such late nodes are a minority, whose only entry (the
// same first entry) wins no election. Whether the table changed since is
// no test: a group whose replicas moved before any of them opened it
// would then never start.
func (d *dataGroups) mayBootstrap(g fsm.DataGroup) bool {
	if !slices.Contains(g.Bootstrap, d.n.cfg.NodeID) {
		return false
	}
	_, err := os.Stat(groupTombstone(d.n.cfg.DataDir, g.ID))
	return errors.Is(err, os.ErrNotExist)
}

// openGroup returns the running replica of g, opening it first if needed:
// its stores, its state machine and its Raft, bootstrapped with
// g.Bootstrap when the group has no state here and mayBootstrap says so.
func (d *dataGroups) openGroup(g fsm.DataGroup) (*dataGroup, error) {
	d.mu.Lock()
	dg := d.open[g.ID]
	d.mu.Unlock()
	if dg != nil {
		return dg, nil
	}
	n := d.n
	cfg := n.cfg
	logger := cfg.Logger.With("group", g.ID)
	hlog := slogbridge.HCLog(logger.Handler(), "raft", hclog.LevelFromString(cfg.RaftLogLevel))
	dir := dataGroupDir(cfg.DataDir, g.ID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("data group %d: %w", g.ID, err)
	}
	opts := cfg.storeOptions(hlog)
	opts.Dir = filepath.Join(dir, "raft")
	if opts.WALSegmentBytes == 0 || opts.WALSegmentBytes > dataGroupWALSegment {
		opts.WALSegmentBytes = dataGroupWALSegment
	}
	st, err := raftstore.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("data group %d: %w", g.ID, err)
	}
	layer := n.stores.port.Group(g.ID)
	var tr *raft.NetworkTransport
	local := func() raft.ServerAddress { return tr.LocalAddr() }
	tr = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: layer, MaxPool: 3, Timeout: raftCallTimeout, Logger: hlog,
		ServerAddressProvider: transport.NewAddressProvider(cfg.Peers.Routes(), cfg.NodeID, local),
	})
	stores := &raftStores{logs: st.Logs, stable: st.Stable, snaps: st.Snapshots, transport: tr, layer: layer,
		closers: []func() error{tr.Close, layer.Close, st.Close}}
	// Fault builds slow or hold back every group's Raft log writes, not
	// only the meta group's (docs/faults.md).
	stores.wrap(cfg.WrapRaftStores)
	logOpts := cfg.Log
	logOpts.Sync = log.SyncNone
	if cfg.SyncPartitions {
		logOpts.Sync = log.SyncEveryAppend
	}
	// Catch-up fetches segments from the peers the meta group's registry
	// lists (the group's state machine holds no registry), within the
	// node's one move budget, shared with every group it builds.
	sm := fsm.New(fsm.Config{Dir: filepath.Join(dir, "topics"), Log: logOpts, Logger: logger, Fatal: cfg.Fatal, Self: cfg.NodeID, Group: g.ID,
		Fetcher: catchup.NewSegmentFetcher(cfg.SegmentSource, catchup.FetcherOptions{Timeout: cfg.CatchUpTimeout, Logger: logger, Throttle: n.moves, Stop: n.stop}),
		Peers:   n.fsm.Peers})
	fail := func(err error) (*dataGroup, error) {
		stores.close()
		sm.Close()
		return nil, fmt.Errorf("data group %d: %w", g.ID, err)
	}
	rc := raftConfig(cfg, hlog)
	has, err := raft.HasExistingState(stores.logs, stores.stable, stores.snaps)
	if err != nil {
		return fail(err)
	}
	boot := !has && d.mayBootstrap(g)
	if boot {
		conf, err := d.bootstrapConfiguration(g.Bootstrap)
		if err != nil {
			return fail(err)
		}
		if err := raft.BootstrapCluster(rc, stores.logs, stores.stable, stores.snaps, tr, conf); err != nil {
			return fail(fmt.Errorf("bootstrap: %w", err))
		}
	}
	applied := new(appliedSignal)
	logs := stores.logs
	if cfg.wrapGroupLog != nil {
		logs = cfg.wrapGroupLog(g.ID, logs)
	}
	// Raft reads back what it just wrote (a leader to send it, a follower
	// to apply it): from memory, as the meta group's log.
	// Its writes, applies and snapshots are timed in the node's Raft
	// metrics beside the meta group's (server/raft_metrics.go).
	logs = raftstore.CacheRecent(observe.TimeLogStore(logs, &n.observer.StoreLogs), cfg.RecentLogBytes/dataGroupRecentShare)
	// Raft runs on the transport wrapper the meta group's runs on
	// (package replication/observe): it notes the leader's commit index
	// for noteCaughtUp, cuts each AppendEntries' commit index to the
	// request's last entry and sends a heartbeat of a newer term through
	// Raft's main loop, so that a deposed leader of the group never
	// applies entries of its own as committed (docs/faults.md).
	obs := observe.NewMetrics()
	commits := new(observe.LeaderCommits)
	forwardStop, forwardDone := make(chan struct{}), make(chan struct{})
	trans, observed := stores.observeTransport(obs, commits, forwardStop)
	r, err := raft.NewRaft(rc, &raftFSM{f: sm, applied: applied, obs: n.observer, dataGroup: true, logger: logger}, logs, stores.stable, stores.snaps, trans)
	if err != nil {
		close(forwardStop)
		return fail(fmt.Errorf("start raft: %w", err))
	}
	observed.SetTerm(r.CurrentTerm)
	// Raft receives nothing until Forward runs.
	go func() {
		defer close(forwardDone)
		observed.Forward(forwardStop)
	}()
	layer.Attach(func(id string) bool { return groupMember(r, id) || n.tableLists(g.ID, id) })
	dg = &dataGroup{id: g.ID, raft: r, fsm: sm, stores: stores, applied: applied, bootstrapped: boot,
		commits: commits, obs: obs, forwardStop: forwardStop, forwardDone: forwardDone}
	dg.startCleaner(n, logger)
	dg.startHousekeeping(n, logger)
	d.mu.Lock()
	d.open[g.ID] = dg
	d.mu.Unlock()
	logger.Info("opened a data group replica", "bootstrapped", boot)
	return dg, nil
}

// barrier applies a barrier of the current term on dg, which this node
// leads, once per term.
func (d *dataGroups) barrier(dg *dataGroup) {
	term := dg.raft.CurrentTerm()
	if dg.barrierTerm.Load() == term {
		return
	}
	if err := dg.raft.Barrier(d.n.cfg.ApplyTimeout).Error(); err != nil {
		return
	}
	if dg.raft.CurrentTerm() == term {
		dg.barrierTerm.Store(term)
	}
}

// groupMember reports whether node id may open connections of the group r
// runs: it is in the group's latest configuration, or this replica knows
// none yet (it waits for its leader's first contact).
func groupMember(r *raft.Raft, id string) bool {
	servers := r.GetConfiguration().Configuration().Servers
	return len(servers) == 0 || slices.ContainsFunc(servers, func(s raft.Server) bool { return string(s.ID) == id })
}

// tableLists reports whether the meta group's table, as this node
// applied it, lists node id as a replica of group g, or as one its
// unfinished move adds or removes. A replica whose node was away while
// the group removed it and listed it again keeps the configuration it
// had, which may hold none of the group's voters now: it takes their
// connections too, or it would refuse its leader for good (and never
// retire, the table listing it). Raft's terms and log checks, not this,
// keep a stale member from doing harm.
func (n *Node) tableLists(g uint64, id string) bool {
	for _, dg := range n.fsm.DataGroups().Groups {
		if dg.ID != g {
			continue
		}
		if slices.Contains(dg.Replicas, id) {
			return true
		}
		return dg.Move != nil && (slices.Contains(dg.Move.Added, id) || slices.Contains(dg.Move.Removed, id))
	}
	return false
}

// bootstrapConfiguration is the first configuration of a group whose
// first replicas are ids: voters at their meta-group addresses.
func (d *dataGroups) bootstrapConfiguration(ids []string) (raft.Configuration, error) {
	var conf raft.Configuration
	for _, id := range ids {
		addr, err := d.n.raftAddress(id)
		if err != nil {
			return conf, err
		}
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: addr})
	}
	return conf, nil
}

// raftAddress is node id's Raft address, as the meta group's configuration
// holds it (every group of a node is on its one Raft port).
func (n *Node) raftAddress(id string) (raft.ServerAddress, error) {
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return "", err
	}
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) == id {
			return s.Address, nil
		}
	}
	return "", fmt.Errorf("node %s is not a member", id)
}

// converge moves the configuration of dg, which this node leads, one step
// toward g's replicas: it adds a missing one as a non-voter, promotes a
// caught-up non-voter, removes a node g no longer lists, or hands the
// leadership to g's preferred leader once that one is a caught-up voter.
func (d *dataGroups) converge(dg *dataGroup, g fsm.DataGroup) {
	n := d.n
	logger := n.cfg.Logger.With("group", g.ID)
	cf := dg.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return
	}
	servers := cf.Configuration().Servers
	find := func(id string) (raft.Server, bool) {
		i := slices.IndexFunc(servers, func(s raft.Server) bool { return string(s.ID) == id })
		if i < 0 {
			return raft.Server{}, false
		}
		return servers[i], true
	}
	change := func(what, id string, f raft.IndexFuture) {
		if err := f.Error(); err != nil {
			logger.Warn("data group change failed", "change", what, "node", id, "err", err)
			return
		}
		logger.Info("data group changed", "change", what, "node", id)
	}
	for _, id := range g.Replicas {
		s, in := find(id)
		addr, err := n.raftAddress(id)
		if err != nil {
			continue
		}
		switch {
		case !in:
			change("add non-voter", id, dg.raft.AddNonvoter(raft.ServerID(id), addr, 0, dataGroupChangeTimeout))
			return
		case s.Suffrage != raft.Voter:
			if d.caughtUp(dg, id, string(addr)) {
				change("promote", id, dg.raft.AddVoter(raft.ServerID(id), addr, 0, dataGroupChangeTimeout))
			}
			// Nothing is removed until every listed replica is a
			// voter: a move drops the old replica only after the new
			// one has caught up and votes, never below a majority of
			// caught-up voters.
			return
		}
	}
	for _, s := range servers {
		if !slices.Contains(g.Replicas, string(s.ID)) && string(s.ID) != n.cfg.NodeID {
			change("remove", string(s.ID), dg.raft.RemoveServer(s.ID, 0, dataGroupChangeTimeout))
			return
		}
	}
	pref := g.Replicas[0]
	if pref == n.cfg.NodeID || time.Since(dg.lastTransfer) < dataGroupTransferPause {
		return
	}
	if s, in := find(pref); in && s.Suffrage == raft.Voter && d.caughtUp(dg, pref, string(s.Address)) {
		dg.lastTransfer = time.Now()
		if err := dg.raft.LeadershipTransferToServer(s.ID, s.Address).Error(); err != nil {
			logger.Warn("hand the data group's leadership to its preferred leader", "node", pref, "err", err)
			return
		}
		logger.Info("handed the data group's leadership to its preferred leader", "node", pref)
	}
}

// caughtUp reports whether node id's replica of dg, which this node leads,
// holds all but joinMaxLag of the group's committed entries.
func (d *dataGroups) caughtUp(dg *dataGroup, id, addr string) bool {
	last, err := lastLogOf(dg.stores.transport, dg.raft.CurrentTerm(), d.n.cfg.NodeID, id, addr)
	return err == nil && last+joinMaxLag >= dg.raft.CommitIndex()
}

// stopRunner ends the runner: nothing opens or changes groups after it.
func (d *dataGroups) stopRunner() {
	close(d.stop)
	<-d.done
}

// close shuts down every replica this node runs, after stopRunner.
func (d *dataGroups) close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for id, dg := range d.open {
		errs = append(errs, dg.shutdown())
		delete(d.open, id)
	}
	return errors.Join(errs...)
}

// DataGroupReplica is one data group replica a node runs, as tests and
// status see it.
type DataGroupReplica struct {
	ID uint64
	// Raft is the replica's Raft, FSM its state machine.
	Raft *raft.Raft
	FSM  *fsm.FSM
	// logs is the replica's Raft log store, for effectiveApplied.
	logs raft.LogStore
}

// DataGroupReplicas returns the replicas of data groups this node runs,
// by ascending id.
func (n *Node) DataGroupReplicas() []DataGroupReplica {
	d := n.data
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]DataGroupReplica, 0, len(d.open))
	for _, dg := range d.open {
		out = append(out, DataGroupReplica{ID: dg.id, Raft: dg.raft, FSM: dg.fsm, logs: dg.stores.logs})
	}
	slices.SortFunc(out, func(a, b DataGroupReplica) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// adopt moves the topics of dg, which this node leads, one step toward
// the meta group's: it drops an incarnation the meta group no longer
// holds (deleted, or replaced by a later one), has the group adopt the
// partitions a topic's placement puts in it, and gives a topic the meta
// group's settings. The meta group's state this node applied may lag;
// an incarnation created after it is left alone.
func (d *dataGroups) adopt(dg *dataGroup) {
	// The runner and a produce that finds its topic missing may both
	// adopt; one at a time (a second adopt of the same would change
	// nothing, but would cost a Raft entry).
	dg.adoptMu.Lock()
	defer dg.adoptMu.Unlock()
	n := d.n
	logger := n.cfg.Logger.With("group", dg.id)
	want := map[string]*fsm.Topic{}
	for _, t := range n.fsm.Topics() {
		if slices.Contains(t.Placement, dg.id) {
			want[t.Name] = t
		}
	}
	applied := n.fsm.AppliedIndex()
	propose := func(what string, data []byte, err error) bool {
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
			_, err = n.proposeOn(ctx, dg.raft, dg.fsm, data)
			cancel()
		}
		if err != nil {
			logger.Warn("data group: "+what, "err", err)
			return false
		}
		logger.Info("data group: " + what)
		return true
	}
	now := n.cfg.Now().UnixNano()
	for _, gt := range dg.fsm.Topics() {
		mt := want[gt.Name]
		if mt != nil && mt.CreateIndex == gt.CreateIndex || gt.CreateIndex > applied {
			continue
		}
		data, err := fsm.EncodeDeleteTopic(now, fsm.DeleteTopic{Name: gt.Name, TopicIndex: gt.CreateIndex})
		propose(fmt.Sprintf("drop topic %s~%d", gt.Name, gt.CreateIndex), data, err)
		return
	}
	names := slices.Sorted(maps.Keys(want))
	for _, name := range names {
		mt := want[name]
		gt, err := dg.fsm.Topic(name)
		switch {
		case err != nil || gt.CreateIndex == mt.CreateIndex && (gt.PlacementEpoch < mt.PlacementEpoch || len(gt.Partitions) < len(mt.Partitions)):
			c := fsm.PartitionAdopt{Topic: mt.Name, CreateIndex: mt.CreateIndex, Partitions: int32(len(mt.Partitions)), Config: mt.Config,
				CreatedNanos: mt.CreatedNanos, CreatedBy: mt.CreatedBy, Placement: mt.Placement, Epoch: mt.PlacementEpoch}
			data, err := fsm.EncodeJSON(fsm.CmdPartitionAdopt, now, c)
			if !propose(fmt.Sprintf("adopt the partitions of %s~%d", mt.Name, mt.CreateIndex), data, err) {
				return
			}
		case gt.CreateIndex == mt.CreateIndex && !maps.Equal(gt.Config, mt.Config):
			c := fsm.AlterTopic{Name: name, Config: maps.Clone(mt.Config)}
			for k := range gt.Config {
				if _, ok := mt.Config[k]; !ok {
					c.Delete = append(c.Delete, k)
				}
			}
			slices.Sort(c.Delete)
			data, err := fsm.EncodeAlterTopic(now, c)
			if !propose("take the settings of "+name, data, err) {
				return
			}
		}
	}
}

// DrainNode starts (or, with undo, ends) the drain of placed node id: the
// meta leader then gives its data group replicas and preferred
// leaderships to the other nodes (placement.Evacuate) while it keeps
// serving, and places nothing on it; ended, it takes replicas again by
// balancing. It returns the nodes being drained. Errors:
// backend.ErrNotLeader off the leader, backend.ErrInvalidArgument for a
// node not placed, *backend.FeatureLevelError before every member's build
// knows drains (fsm.PlacedGroupsLevel).
func (n *Node) DrainNode(ctx context.Context, id string, undo bool) ([]string, error) {
	// The meta leader changes the table on its own too (placing, moving,
	// clearing a finished move's mark): a set made from a table that
	// changed meanwhile is refused, and made again from the new one.
	for try := 1; ; try++ {
		draining, err := n.drainNode(ctx, id, undo)
		if err == nil || !errors.Is(err, backend.ErrMembershipChange) || try == drainTries || ctx.Err() != nil {
			return draining, err
		}
	}
}

// drainTries bounds DrainNode's attempts against a table that keeps
// changing under it.
const drainTries = 10

// drainNode is one attempt of DrainNode, on the table as this node has it.
func (n *Node) drainNode(ctx context.Context, id string, undo bool) ([]string, error) {
	tab := n.fsm.DataGroups()
	if !slices.Contains(tab.Nodes, id) {
		return nil, fmt.Errorf("%w: %q holds no data group replicas to drain (placed: %v)", backend.ErrInvalidArgument, id, tab.Nodes)
	}
	draining := slices.DeleteFunc(slices.Clone(tab.Draining), func(d string) bool { return d == id })
	if !undo {
		draining = append(draining, id)
	}
	if slices.Equal(draining, tab.Draining) {
		return draining, nil
	}
	if len(draining) == len(tab.Nodes) {
		return nil, fmt.Errorf("%w: draining %s would leave no node to hold the data groups", backend.ErrInvalidArgument, id)
	}
	data, err := fsm.EncodeDataGroups(n.cfg.Now().UnixNano(), fsm.DataGroupsSet{Base: tab.Epoch, Groups: tab.Groups, Nodes: tab.Nodes, Draining: draining})
	if err != nil {
		return nil, err
	}
	if _, err := n.propose(ctx, data); err != nil {
		return nil, err
	}
	return draining, nil
}
