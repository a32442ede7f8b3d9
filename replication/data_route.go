package replication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/partition"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/placement"
	"github.com/logd-dev/logd/replication/transport"
)

// Routing to data groups (docs/architecture.md, "Data groups"). A topic
// the meta group placed (fsm.Topic.Placement) has each partition in a
// data group. A produce or an append to it is split by group; each part is
// answered by its group's leader, here when this node leads the group,
// else by a call over the Raft port (transport.Port.Call) to the node
// that leads it, and the answers are merged in the caller's order. Each
// part is atomic in its group; the call as a whole is not (a part can
// fail after another was appended: the error says so, and a retry with
// idempotency keys appends nothing twice).
//
// Keyless records without an idempotency key go, per call, to the
// partitions of one group (a run of calls to each group in turn,
// keylessRun, then over the group's partitions call by call), so such a
// call is atomic; a keyless record with an
// idempotency key goes to the partition its key hashes to, so a retry
// meets its first attempt in the same group's window.

// groupHandle is a group this node can append to: its state machine and
// its proposals (the node leads it).
type groupHandle struct {
	id      uint64
	fsm     *fsm.FSM
	propose func(ctx context.Context, data []byte) (any, error)
	// proposeAppend proposes an encoded append through the group's
	// coalescer (coalesce.go); queued, if not nil, is called once the
	// append is queued, so that whatever is proposed after it follows
	// it in the group's log.
	proposeAppend func(ctx context.Context, data []byte, queued func()) (any, error)
	// adopt, for a data group, has it adopt its partitions of the meta
	// group's topics now, rather than at the runner's next pass; meta is
	// this node's meta group state machine. Both nil for the meta group.
	adopt func()
	meta  *fsm.FSM
}

// topic returns the group's state machine's topic name, the incarnation
// the meta group holds (the caller's meta index is applied here first).
// A data group that does not hold it yet, though the meta group placed it
// there (a produce right after the creation), adopts it first; one that
// still holds an earlier topic of the name (deleted and created again,
// not dropped by the group yet) drops that one and adopts this one
// first, so that nothing is written to, or read from, a topic that is
// being dropped. A group that cannot adopt it now (no majority, say), or
// holds an incarnation this node's meta group has not applied yet, is
// unavailable for now (backend.ErrNotLeader, which callers retry), not
// unknown.
func (g groupHandle) topic(name string) (*fsm.Topic, error) {
	t, err := g.fsm.Topic(name)
	if g.adopt == nil {
		return t, err
	}
	// One adopt pass drops an earlier incarnation, the next adopts this one.
	for pass := 0; ; pass++ {
		mt, merr := g.meta.Topic(name)
		switch {
		case merr != nil:
			// Deleted since the caller found it: the group's copy, if
			// it holds one, is being dropped.
			return nil, merr
		case err == nil && t.CreateIndex == mt.CreateIndex:
			return t, nil
		case err == nil && t.CreateIndex > mt.CreateIndex:
			return nil, fmt.Errorf("%w: data group %d holds topic %s~%d, which this node's meta group has not applied yet", backend.ErrNotLeader, g.id, name, t.CreateIndex)
		case err != nil && !errors.Is(err, backend.ErrUnknownTopic):
			return nil, err
		case pass == 2:
			return nil, fmt.Errorf("%w: data group %d has not adopted topic %s~%d yet", backend.ErrNotLeader, g.id, name, mt.CreateIndex)
		}
		g.adopt()
		t, err = g.fsm.Topic(name)
	}
}

// topicFor is topic for a call that names partitions below need: a data
// group that holds the topic but not yet the partitions a growth placed
// in it (a produce right after CreatePartitions) adopts them first, and
// answers ErrNotLeader (retryable) when it still cannot.
func (g groupHandle) topicFor(name string, need int32) (*fsm.Topic, error) {
	t, err := g.topic(name)
	if err != nil || int(need) <= len(t.Partitions) || g.adopt == nil {
		return t, err
	}
	g.adopt()
	if t, err = g.fsm.Topic(name); err == nil && int(need) > len(t.Partitions) {
		// Partitions beyond the meta group's count are the state
		// machine's to refuse (ErrUnknownPartition).
		return t, nil
	}
	return t, err
}

// partitionsNeeded is one more than the highest partition a produce's
// records name (partitions, when not nil, in their place): 0 when none
// names one.
func partitionsNeeded(req backend.ProduceRequest, partitions []int32) int32 {
	var need int32
	if partitions != nil {
		for _, p := range partitions {
			need = max(need, p+1)
		}
		return need
	}
	for _, r := range req.Records {
		if r.HasPartition {
			need = max(need, r.Partition+1)
		}
	}
	return need
}

// metaGroup is the meta group's handle.
func (n *Node) metaGroup() groupHandle {
	return groupHandle{id: 0, fsm: n.fsm, propose: n.propose, proposeAppend: func(ctx context.Context, data []byte, queued func()) (any, error) {
		return n.proposeAppend(ctx, &n.appends, n.raft, n.fsm, data, queued)
	}}
}

// dataGroup returns this node's replica of data group id, nil without
// one.
func (n *Node) dataGroup(id uint64) *dataGroup {
	n.data.mu.Lock()
	defer n.data.mu.Unlock()
	return n.data.open[id]
}

// handle is dg's groupHandle on node n.
func (dg *dataGroup) handle(n *Node) groupHandle {
	return groupHandle{id: dg.id, fsm: dg.fsm, propose: func(ctx context.Context, data []byte) (any, error) {
		return n.proposeOn(ctx, dg.raft, dg.fsm, data)
	}, proposeAppend: func(ctx context.Context, data []byte, queued func()) (any, error) {
		return n.proposeAppend(ctx, &dg.appends, dg.raft, dg.fsm, data, queued)
	}, adopt: func() { n.data.adopt(dg) }, meta: n.fsm}
}

// stateMachines are the meta group's state machine and this node's data
// group replicas'.
func (n *Node) stateMachines() []*fsm.FSM {
	out := []*fsm.FSM{n.fsm}
	for _, r := range n.DataGroupReplicas() {
		out = append(out, r.FSM)
	}
	return out
}

// partitionFSM returns the state machine that holds partition p of topic
// here: the meta group's for a topic without a placement, else this
// node's replica of the partition's data group; a
// *fsm.PartitionElsewhereError when this node holds no replica of it.
func (n *Node) partitionFSM(topic string, p int32) (*fsm.FSM, error) {
	t, err := n.fsm.Topic(topic)
	if err != nil || t.Placement == nil {
		return n.fsm, err
	}
	if _, err := t.Partition(p); err == nil {
		return n.fsm, nil
	} else if !errors.Is(err, backend.ErrPartitionElsewhere) {
		return nil, err
	}
	g := t.PartitionGroup(p)
	if dg := n.dataGroup(g); dg != nil {
		if n.data.servesNow(dg) && n.atGroupFloor(context.Background(), dg) {
			return dg.fsm, nil
		}
	}
	return nil, &fsm.PartitionElsewhereError{Topic: topic, Partition: p, Group: g}
}

// placeTopic returns the data group of each of a new topic's partitions
// (placement.Partitions over the table, from a group the topic's name
// picks) and the placement's epoch, the table's; nil without data groups.
func (n *Node) placeTopic(ctx context.Context, name string, partitions int) ([]uint64, uint64, error) {
	tab, err := n.awaitDataGroups(ctx)
	if err != nil || len(tab.Groups) == 0 {
		return nil, 0, err
	}
	p := make(placement.Plan, len(tab.Groups))
	for i, g := range tab.Groups {
		p[i] = placement.Group{ID: g.ID, Replicas: g.Replicas}
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	pl, err := placement.Partitions(p, h.Sum64(), partitions)
	if err != nil {
		return nil, 0, fmt.Errorf("place topic %s: %w", name, err)
	}
	return pl, tab.Epoch, nil
}

// firstPlaceWait bounds how long a topic's creation on the meta leader
// waits for the first data groups of a cluster that is to have them.
const firstPlaceWait = 5 * time.Second

// awaitDataGroups returns the table of data groups. On the meta leader
// of a cluster that is to have data groups and has none yet (a new
// cluster's first moments, before the runner's first placement), it
// waits for them first, up to firstPlaceWait: a topic created before
// would stay in the meta group for good, and, with
// Config.DataGroupsPerNodeIsDefault, keep the cluster without data
// groups (dataGroupsPerNode). Past the wait, or once ctx ends,
// backend.ErrNotLeader: the creation is not proposed, and a retry may
// find the groups placed.
func (n *Node) awaitDataGroups(ctx context.Context) (fsm.DataGroupTable, error) {
	tab := n.fsm.DataGroups()
	if len(tab.Groups) > 0 || n.stores.port == nil || !n.IsLeader() || n.dataGroupsPerNode(tab) == 0 {
		return tab, nil
	}
	if level, err := n.featureLevel(); err != nil || level < fsm.DataGroupLevel {
		return tab, nil
	}
	timer := time.NewTimer(firstPlaceWait)
	defer timer.Stop()
	for {
		applied := n.applied.wait()
		if tab = n.fsm.DataGroups(); len(tab.Groups) > 0 {
			return tab, nil
		}
		select {
		case <-applied:
		case <-timer.C:
			return tab, fmt.Errorf("%w: the cluster's first data groups are not placed yet (after %v)", backend.ErrNotLeader, firstPlaceWait)
		case <-ctx.Done():
			return tab, fmt.Errorf("%w: the cluster's first data groups are not placed yet: %v", backend.ErrNotLeader, ctx.Err())
		case <-n.stop:
			return tab, backend.ErrShutdown
		}
	}
}

// hostedPartition returns partition p of t (a topic of the meta group)
// as this node holds it: from the meta group, or from its replica of the
// partition's data group.
func (n *Node) hostedPartition(t *fsm.Topic, p int32) (*fsm.Partition, error) {
	if t.Placement == nil {
		return t.Partition(p)
	}
	f, err := n.partitionFSM(t.Name, p)
	if err != nil {
		return nil, err
	}
	return groupPartition(n.fsm, f, t.Name, p)
}

// LeadsPartition reports whether this node leads partition p of topic:
// the partition's data group, with a barrier of its term applied, or,
// for a partition of the meta group (or one it does not know), the meta
// group.
func (n *Node) LeadsPartition(topic string, p int32) bool {
	t, err := n.fsm.Topic(topic)
	if err != nil || t.Placement == nil || p < 0 || int(p) >= len(t.Placement) {
		return n.IsLeader()
	}
	dg := n.dataGroup(t.Placement[p])
	return dg != nil && dg.leadsReady()
}

// partitionLeader returns the group that holds partition p of t and the
// node this node knows leads it ("" when none is known).
func (n *Node) partitionLeader(t *fsm.Topic, p int32) (uint64, string) {
	if t.Placement == nil || p < 0 || int(p) >= len(t.Placement) {
		_, id := n.raft.LeaderWithID()
		return 0, string(id)
	}
	g := t.Placement[p]
	dg := n.dataGroup(g)
	if dg == nil {
		return g, ""
	}
	_, id := dg.raft.LeaderWithID()
	return g, string(id)
}

// remotePoll is how soon a read a replica of another node answered lets
// a long poll read again: no append can wake a waiter across nodes.
const remotePoll = 100 * time.Millisecond

// readRemoteCall reads what rc asks of a partition in data group g, of
// which this node holds no replica, from the group's replicas (the
// preferred leader first): Backend.Read for a node outside the group, and
// the call's offset for a time. The answer's Changed closes after
// remotePoll.
func (n *Node) readRemoteCall(ctx context.Context, g uint64, rc readCall) (backend.ReadResult, int64, error) {
	return n.readRemoteFloor(ctx, g, rc, 0)
}

// readRemoteFrom is readRemote for rc from a replica whose partition
// ends at floor or later (read_floor.go).
func (n *Node) readRemoteFrom(ctx context.Context, g uint64, rc readCall, floor int64) (backend.ReadResult, error) {
	res, _, err := n.readRemoteFloor(ctx, g, rc, floor)
	return res, err
}

// readRemoteFloor is readRemoteCall from a replica whose partition ends
// at floor or later: a replica behind it (or past whose end the read
// asks, at an end below it) passes the call to the next; with none,
// *backend.BehindError.
func (n *Node) readRemoteFloor(ctx context.Context, g uint64, rc readCall, floor int64) (backend.ReadResult, int64, error) {
	var res backend.ReadResult
	var offset int64
	behind := false
	var unknown error
	err := n.askReplica(ctx, g, rc.Topic, groupCall{Kind: callRead, Read: &rc}, func(ans groupAnswer) error {
		if err := answerErr(ans); err != nil {
			if errors.Is(err, backend.ErrUnknownTopic) {
				// A replica that has not adopted the topic yet: another
				// may have (the error stays the topic's when none has).
				unknown = err
				return fmt.Errorf("%w: %w", errNextReplica, err)
			}
			var oor *backend.OutOfRangeError
			if errors.As(err, &oor) && oor.End < floor {
				behind = true
				return fmt.Errorf("%w: its partition ends at %d, below %d", errNextReplica, oor.End, floor)
			}
			return err
		}
		if ans.Read == nil {
			return fmt.Errorf("%w: a read answer without its batches", errNextReplica)
		}
		if ans.Read.End < floor {
			behind = true
			return fmt.Errorf("%w: its partition ends at %d, below %d", errNextReplica, ans.Read.End, floor)
		}
		changed := make(chan struct{})
		time.AfterFunc(remotePoll, func() { close(changed) })
		res = backend.ReadResult{Batches: ans.Read.Batches, LogStartOffset: ans.Read.LogStart, EndOffset: ans.Read.End, Changed: changed}
		offset = ans.Read.Offset
		return nil
	})
	switch {
	case err != nil && behind && errors.Is(err, errNextReplica):
		addr, _ := n.LeaderAPIAddress()
		err = &backend.BehindError{What: fmt.Sprintf("%s-%d up to %d, which this node answered before (no replica it reached has applied it yet)", rc.Topic, rc.Partition, floor), LeaderAddress: addr}
	case err != nil && unknown != nil && rc.Leader:
		// The group's leader has not adopted the topic yet (the others,
		// asked after it, answered as followers): the topic's error, as
		// from any replica.
		err = unknown
	}
	return res, offset, err
}

// errNextReplica, wrapped in an error askReplica's accept returns, passes
// the call to the next replica.
var errNextReplica = errors.New("ask the next replica")

// askReplica sends call to the replicas of group g other than this node,
// in turn, until one answers it: accept takes each answer (its error
// too, except one saying the node holds no replica, which passes to the
// next replica); an error from accept that wraps errNextReplica passes to
// the next replica, any other ends the call. topic names what is read,
// for the error when no replica answers: backend.ErrNotLeader, which a
// client retries, since the group's replicas may be electing, catching up
// or restarting (docs/architecture.md, "Data groups").
func (n *Node) askReplica(ctx context.Context, g uint64, topic string, call groupCall, accept func(groupAnswer) error) error {
	var replicas []string
	for _, dg := range n.fsm.DataGroups().Groups {
		if dg.ID == g {
			replicas = dg.Replicas
		}
	}
	last := fmt.Errorf("%w: data group %d has no replica this node can reach (topic %s)", backend.ErrNotLeader, g, topic)
	call.MinApplied = n.groupFloors.get(g)
	for _, id := range replicas {
		if id == n.cfg.NodeID {
			continue
		}
		ans, err := n.callGroup(ctx, id, g, call)
		switch {
		case err != nil:
			last = fmt.Errorf("%w: data group %d at %s: %v", backend.ErrNotLeader, g, id, err)
			continue
		case ans.Err != nil && errors.Is(ans.Err.decode(), backend.ErrNotLeader): // holds no replica (any more)
			last = ans.Err.decode()
			continue
		}
		if err := accept(ans); err != nil {
			if errors.Is(err, errNextReplica) {
				last = fmt.Errorf("data group %d at %s: %w", g, id, err)
				continue
			}
			return err
		}
		return nil
	}
	return last
}

// answerErr is accept's error for an answer with an error: the error
// itself, which ends the call.
func answerErr(ans groupAnswer) error {
	if ans.Err != nil {
		return ans.Err.decode()
	}
	return nil
}

// readYourWritesWait bounds how long a node waits for its replica of a
// group to apply a write the group's leader acknowledged to it.
const readYourWritesWait = 2 * time.Second

// awaitApplied waits until dg's replica applied index, at most wait or
// until ctx ends; a replica that stays behind is left so (a read through
// this node may then miss the write, as through another follower).
func (dg *dataGroup) awaitApplied(ctx context.Context, index uint64, wait time.Duration) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		ch := dg.applied.wait()
		if dg.fsm.AppliedIndex() >= index {
			return
		}
		select {
		case <-ch:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// confirmLeader reports whether dg's replica leads its group, applied a
// barrier of its term, and still leads once a majority confirmed it
// (raft.VerifyLeader): it then holds every write its group acknowledged.
func (dg *dataGroup) confirmLeader() bool {
	return dg.leadsReady() && dg.raft.VerifyLeader().Error() == nil
}

// ReadLeader is Backend.Read as the leader of the partition's data group
// answers it once it confirmed its leadership: here when this node leads
// the group, else at the group's leader (following its replicas' hints,
// for at most groupCallWait). A partition of the meta group is read here.
func (b *Backend) ReadLeader(ctx context.Context, topic string, p int32, offset int64, maxBytes int) (backend.ReadResult, error) {
	t, err := b.fsm.Topic(topic)
	if err != nil || t.Placement == nil || p < 0 || int(p) >= len(t.Placement) {
		return b.Read(topic, p, offset, maxBytes)
	}
	g := t.Placement[p]
	var res backend.ReadResult
	err = b.inGroup(ctx, g, func(h groupHandle) error {
		dg := b.dataGroup(g)
		if dg == nil || !dg.confirmLeader() {
			return fmt.Errorf("%w: data group %d", backend.ErrNotLeader, g)
		}
		// A topic just created: the leader adopts it first.
		if _, err := h.topic(topic); err != nil {
			return err
		}
		var err error
		res, err = readBatches(b.fsm, dg.fsm, topic, p, offset, maxBytes, 0)
		return err
	}, groupCall{Kind: callRead, Read: &readCall{Topic: topic, Partition: p, Offset: offset, MaxBytes: maxBytes, Leader: true}}, func(a groupAnswer) error {
		if a.Read == nil {
			return fmt.Errorf("data group %d: a read answer without its batches", g)
		}
		changed := make(chan struct{})
		time.AfterFunc(remotePoll, func() { close(changed) })
		res = backend.ReadResult{Batches: a.Read.Batches, LogStartOffset: a.Read.LogStart, EndOffset: a.Read.End, Changed: changed}
		return nil
	})
	return res, fromStorage(err)
}

// OffsetsLeader is Backend.Offsets as the leader of the partition's data
// group answers it once it confirmed its leadership (ReadLeader's bounds);
// a partition of the meta group's bounds are this node's.
func (b *Backend) OffsetsLeader(ctx context.Context, topic string, p int32) (backend.Offsets, error) {
	t, err := b.fsm.Topic(topic)
	if err != nil || t.Placement == nil || p < 0 || int(p) >= len(t.Placement) {
		return b.Offsets(topic, p)
	}
	g := t.Placement[p]
	var o backend.Offsets
	err = b.inGroup(ctx, g, func(h groupHandle) error {
		dg := b.dataGroup(g)
		if dg == nil || !dg.confirmLeader() {
			return fmt.Errorf("%w: data group %d", backend.ErrNotLeader, g)
		}
		// A topic just created: the leader adopts it first.
		gt, err := h.topic(topic)
		if err != nil {
			return err
		}
		part, err := gt.Partition(p)
		if err != nil {
			return err
		}
		o = backend.Offsets{LogStart: part.Log().StartOffset(), End: part.Log().EndOffset()}
		return nil
	}, groupCall{Kind: callRead, Read: &readCall{Topic: topic, Partition: p, Leader: true}}, func(a groupAnswer) error {
		if a.Read == nil {
			return fmt.Errorf("data group %d: an offsets answer without its bounds", g)
		}
		o = backend.Offsets{LogStart: a.Read.LogStart, End: a.Read.End}
		return nil
	})
	return o, fromStorage(err)
}

// keylessRun is how many records of keyless calls (without idempotency
// keys) a node sends to one data group of a topic before it sends them to
// the next, round robin. Calls of a few records, many at once, then meet
// in one group, whose coalescer puts them in few Raft entries, where a
// group per call spread them over every group's log, each entry carrying
// a few (docs/performance.md, "Data groups by default"); calls of
// thousands of records still go to a group each. Kafka's sticky
// partitioner sticks to a partition for a batch's worth likewise.
const keylessRun = 1024

// spreadPart is the records of one call bound for one data group, with
// their positions in the call.
type spreadPart struct {
	group uint64
	req   backend.ProduceRequest
	// n counts the part's records while they are assigned.
	n         int
	positions []int
	// partitions, when not nil, are the partitions of req's records,
	// which are the call's own (a call in one group: not copied, so they
	// carry none); else each record carries its own.
	partitions []int32
}

// partition is the partition of the part's record j.
func (sp *spreadPart) partition(j int) int32 {
	if sp.partitions != nil {
		return sp.partitions[j]
	}
	return sp.req.Records[j].Partition
}

// produceSpread answers req on a topic with a placement: each record gets
// its partition here (see above), and each group's records are produced
// by that group's leader.
func (p *producer) produceSpread(ctx context.Context, t *fsm.Topic, req backend.ProduceRequest) (backend.ProduceResult, error) {
	n := int32(len(t.Placement))
	if n == 0 {
		return backend.ProduceResult{}, fmt.Errorf("%w: %s has no partitions", backend.ErrUnknownPartition, t.Name)
	}
	// First each record's partition, and how many records each group
	// gets. A call in one group (every keyless call, and every call with
	// one group) hands its records over as they are, their partitions
	// beside them; a call over several copies each group's records once
	// into a slice of their number (a call of many records is the common
	// case), so that each part can be sent to another node.
	assigned := make([]int32, len(req.Records))
	var parts []*spreadPart
	var keyless []int32 // the partitions of the call's keyless group
	var next uint32
	for i, r := range req.Records {
		part := r.Partition
		switch {
		case r.HasPartition:
			if part < 0 || part >= n {
				return backend.ProduceResult{}, fmt.Errorf("%w: %s has %d partitions, not %d", backend.ErrUnknownPartition, t.Name, n, part)
			}
		case r.Key != nil:
			part = partition.ForKey(r.Key, n)
		case r.IdempotencyKey != "":
			h := fnv.New32a()
			h.Write([]byte(r.IdempotencyKey))
			part = int32(h.Sum32() % uint32(n))
		default:
			if keyless == nil {
				// The call's records count toward the topic's keyless
				// run: calls go to one group until keylessRun records
				// went there, then to the next (see keylessRun).
				groups := placementGroups(t.Placement)
				c := p.rr.add(t.Name, uint32(len(req.Records)))
				g := groups[int(c/keylessRun%uint32(len(groups)))]
				for q, pg := range t.Placement {
					if pg == g {
						keyless = append(keyless, int32(q))
					}
				}
				next = c
			}
			part = keyless[next%uint32(len(keyless))]
			next++
		}
		assigned[i] = part
		g := t.Placement[part]
		k := slices.IndexFunc(parts, func(sp *spreadPart) bool { return sp.group == g })
		if k < 0 {
			parts = append(parts, &spreadPart{group: g, req: backend.ProduceRequest{Topic: req.Topic}})
			k = len(parts) - 1
		}
		parts[k].n++
	}
	if len(parts) == 1 { // the whole call in one group: its answer, as is
		sp := parts[0]
		sp.req, sp.partitions = req, assigned
		if req.Producer != nil {
			if err := splitProducer(req.Producer, parts); err != nil {
				return backend.ProduceResult{}, err
			}
		}
		return p.n.produceInGroup(ctx, p, sp.group, sp.req, sp.partitions)
	}
	for _, sp := range parts {
		sp.req.Records = make([]backend.ProduceRecord, 0, sp.n)
		sp.positions = make([]int, 0, sp.n)
	}
	for i, r := range req.Records {
		g := t.Placement[assigned[i]]
		sp := parts[slices.IndexFunc(parts, func(sp *spreadPart) bool { return sp.group == g })]
		r.Partition, r.HasPartition = assigned[i], true
		sp.req.Records = append(sp.req.Records, r)
		sp.positions = append(sp.positions, i)
	}
	if req.Producer != nil {
		if err := splitProducer(req.Producer, parts); err != nil {
			return backend.ProduceResult{}, err
		}
	}
	results := make([]backend.ProduceResult, len(parts))
	errs := inParallel(len(parts), func(i int) (err error) {
		results[i], err = p.n.produceInGroup(ctx, p, parts[i].group, parts[i].req, nil)
		return err
	})
	out := backend.ProduceResult{Results: make([]backend.RecordResult, len(req.Records))}
	for i, sp := range parts {
		if errs[i] != nil {
			if len(parts) > 1 {
				return backend.ProduceResult{}, fmt.Errorf("data group %d (%d of the call's records; other groups' records may be appended): %w", sp.group, len(sp.positions), errs[i])
			}
			return backend.ProduceResult{}, errs[i]
		}
		r := results[i]
		for j, pos := range sp.positions {
			out.Results[pos] = r.Results[j]
		}
		out.Appended += r.Appended
		out.Duplicates += r.Duplicates
		out.ProducerChecked = r.ProducerChecked && (i == 0 || out.ProducerChecked)
		out.Bytes += r.Bytes
		out.CommitTime = max(out.CommitTime, r.CommitTime)
	}
	return out, nil
}

// splitProducer gives each group's part of a call the producer's
// sequences of the partitions its records go to; every partition the
// producer names must get records.
func splitProducer(pr *backend.ProducerSequence, parts []*spreadPart) error {
	n := 0
	for _, sp := range parts {
		own := &backend.ProducerSequence{ID: pr.ID, Epoch: pr.Epoch, BaseSequences: map[int32]int32{}}
		for j := range sp.req.Records {
			part := sp.partition(j)
			if _, done := own.BaseSequences[part]; done {
				continue
			}
			seq, ok := pr.BaseSequences[part]
			if !ok {
				return fmt.Errorf("%w: producer %d has no sequence for partition %d", backend.ErrInvalidArgument, pr.ID, part)
			}
			own.BaseSequences[part] = seq
		}
		n += len(own.BaseSequences)
		sp.req.Producer = own
	}
	if n != len(pr.BaseSequences) {
		return fmt.Errorf("%w: producer %d has sequences for %d partitions, the records go to %d", backend.ErrInvalidArgument, pr.ID, len(pr.BaseSequences), n)
	}
	return nil
}

// inParallel runs f(0) .. f(n-1) at once, each group's part of a call on
// its own goroutine, and returns their errors by i once all have ended.
func inParallel(n int, f func(i int) error) []error {
	errs := make([]error, n)
	if n == 1 { // a call in one group: no goroutine to wait for
		errs[0] = f(0)
		return errs
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errs
}

// placementGroups are the distinct groups of a placement, in order of
// first appearance.
func placementGroups(pl []uint64) []uint64 {
	var out []uint64
	for _, g := range pl {
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

// appendSpread is appendBatches on a topic with a placement: each group's
// batches are appended by that group's leader.
func (p *producer) appendSpread(ctx context.Context, t *fsm.Topic, a fsm.Append, checked appendChecks) ([]int64, error) {
	type part struct {
		group     uint64
		app       fsm.Append
		positions []int
	}
	byGroup := map[uint64]*part{}
	var parts []*part
	for i, b := range a.Batches {
		if b.Partition < 0 || int(b.Partition) >= len(t.Placement) {
			return nil, fmt.Errorf("%w: %s has %d partitions, not %d", backend.ErrUnknownPartition, t.Name, len(t.Placement), b.Partition)
		}
		g := t.Placement[b.Partition]
		pt := byGroup[g]
		if pt == nil {
			pt = &part{group: g, app: fsm.Append{Topic: a.Topic}}
			byGroup[g] = pt
			parts = append(parts, pt)
		}
		pt.app.Batches = append(pt.app.Batches, b)
		pt.positions = append(pt.positions, i)
	}
	bases := make([]int64, len(a.Batches))
	var partial *backend.PartialAppendError
	results := make([][]int64, len(parts))
	errs := inParallel(len(parts), func(i int) (err error) {
		results[i], err = p.n.appendInGroup(ctx, p, parts[i].group, parts[i].app, checked)
		return err
	})
	for i, pt := range parts {
		var pe *backend.PartialAppendError
		switch {
		case errors.As(errs[i], &pe):
			if partial == nil {
				partial = &backend.PartialAppendError{Offsets: bases, Errs: make([]error, len(a.Batches))}
			}
			for j, pos := range pt.positions {
				bases[pos], partial.Errs[pos] = pe.Offsets[j], pe.Errs[j]
			}
		case errs[i] != nil:
			if partial == nil {
				partial = &backend.PartialAppendError{Offsets: bases, Errs: make([]error, len(a.Batches))}
			}
			for _, pos := range pt.positions {
				bases[pos], partial.Errs[pos] = -1, errs[i]
			}
		default:
			for j, pos := range pt.positions {
				bases[pos] = results[i][j]
			}
		}
	}
	if partial != nil {
		if len(parts) == 1 {
			return nil, errs[0]
		}
		return bases, partial
	}
	return bases, nil
}

// Calls between nodes for data groups (transport.Port.Call): a request
// names what it asks, the answer is a groupAnswer; both are JSON, but for
// a produce's and an append's once every member reads their binary form
// (call_binary.go).
const (
	callProduce = "produce"
	callAppend  = "append"
	callRead    = "read"
	// callConfig asks any replica of a group for the voters of its
	// configuration (sorted), as JSON in the answer's Result.
	callConfig = "config"
	// callConverge hands a group's leader the table's entry for the
	// group; a leader it does not list hands its leadership to a voter it
	// lists (data_groups.go, healUnlisted).
	callConverge = "converge"
)

// groupCall is a call's request.
type groupCall struct {
	Kind string `json:"kind"`
	// MetaIndex is the meta group's index the caller had applied: the
	// answering node applies it first, so that it knows the topics the
	// caller knew (a topic just created, say).
	MetaIndex uint64 `json:"meta_index,omitempty"`
	// MinApplied is the group's index a read must have applied (the
	// caller's floor of the group, read_floor.go): a replica behind it
	// waits a little, then answers ErrNotLeader, which sends the caller
	// to the next replica. A node of an earlier build ignores it.
	MinApplied uint64                  `json:"min_applied,omitempty"`
	Produce    *backend.ProduceRequest `json:"produce,omitempty"`
	Append     *fsm.Append             `json:"append,omitempty"`
	Read       *readCall               `json:"read,omitempty"`
	// Queue is an encoded queue command (callQueue), QueueRead a read of
	// a queue group's copy (callQueueRead).
	Queue     []byte         `json:"queue,omitempty"`
	QueueRead *queueReadCall `json:"queue_read,omitempty"`
	// Converge is the table's entry for the group (callConverge).
	Converge *fsm.DataGroup `json:"converge,omitempty"`
	// partitions, when not nil, are the partitions of Produce's records,
	// which carry none (produceInGroup); sendable gives them to the
	// records before the call goes out. Not sent.
	partitions []int32
	// jsonOnly sends the call in JSON even where the cluster's level
	// allows the binary form (call_binary.go): a node refused it. Not
	// sent.
	jsonOnly bool
	// Group is a consumer group command (callGroupCmd) or the group to
	// place (callGroupPlace), GroupRead a read of consumer groups
	// (callGroupRead; groups_route.go).
	Group     *groupCmdCall  `json:"group,omitempty"`
	GroupRead *groupReadCall `json:"group_read,omitempty"`
	// Service, Body and From are a callLeader's: the service, its
	// request and the calling node's id (leader_calls.go).
	Service string `json:"service,omitempty"`
	Body    []byte `json:"body,omitempty"`
	From    string `json:"from,omitempty"`
	// Cut names a held cut of a backup (backup_cuts.go).
	Cut *cutCall `json:"cut,omitempty"`
}

// readCall asks a replica of a group for a partition's stored batches
// from Offset (at most MaxBytes, at least one batch), as Backend.Read;
// with MaxBytes 0, for its bounds only. With Leader, only the group's
// leader answers, once it confirmed its leadership (ReadLeader).
type readCall struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	MaxBytes  int    `json:"max_bytes"`
	// MaxRecords bounds the read by a record count (Backend.ReadRecords;
	// 0: none). A node of an earlier build ignores it and reads max
	// bytes, which answers the same records and more.
	MaxRecords int  `json:"max_records,omitempty"`
	Leader     bool `json:"leader,omitempty"`
	// TimestampMs, when set, asks for the first offset whose batch's
	// max timestamp is at or after it (Backend.OffsetForTime) with the
	// bounds.
	TimestampMs *int64 `json:"timestamp_ms,omitempty"`
}

// readAnswer is a readCall's answer.
type readAnswer struct {
	Batches  []byte `json:"batches"`
	LogStart int64  `json:"log_start"`
	End      int64  `json:"end"`
	// Offset answers a readCall's TimestampMs.
	Offset int64 `json:"offset,omitempty"`
}

// groupAnswer is a call's answer: its result, or its error.
type groupAnswer struct {
	Produce *backend.ProduceResult `json:"produce,omitempty"`
	Read    *readAnswer            `json:"read,omitempty"`
	Bases   []int64                `json:"bases,omitempty"`
	// BatchErrs are an append's errors by batch when some of its
	// batches were refused (backend.PartialAppendError), nil for a
	// written one.
	BatchErrs []*wireError `json:"batch_errs,omitempty"`
	// Result is a queue call's result as JSON.
	Result json.RawMessage `json:"result,omitempty"`
	Err    *wireError      `json:"err,omitempty"`
	// Leader is the node this node knows leads the group, when it does
	// not (Err is then backend.ErrNotLeader).
	Leader string `json:"leader,omitempty"`
	// Applied is the group's index the answering leader had applied when
	// it answered a write: a caller that holds a replica of the group
	// applies it before answering its own caller, so a read through the
	// same node sees the write.
	Applied uint64 `json:"applied,omitempty"`
}

// sendable returns c as it goes to another node: a produce's records
// carry the partitions c.partitions gave them (copied: the caller's are
// not changed).
func (c groupCall) sendable() groupCall {
	if c.partitions == nil || c.Produce == nil {
		return c
	}
	req := *c.Produce
	req.Records = make([]backend.ProduceRecord, len(c.Produce.Records))
	for i, r := range c.Produce.Records {
		r.Partition, r.HasPartition = c.partitions[i], true
		req.Records[i] = r
	}
	c.Produce, c.partitions = &req, nil
	return c
}

// groupCallWait bounds how long a call for a group waits for the group to
// have a leader it can reach.
const groupCallWait = 5 * time.Second

// produceInGroup produces req in data group g: here when this node leads
// it, else at its leader. partitions, when not nil, are the partitions of
// req's records, which then carry none.
func (n *Node) produceInGroup(ctx context.Context, p *producer, g uint64, req backend.ProduceRequest, partitions []int32) (backend.ProduceResult, error) {
	var res backend.ProduceResult
	err := n.inGroup(ctx, g, func(h groupHandle) error {
		t, err := h.topicFor(req.Topic, partitionsNeeded(req, partitions))
		if err != nil {
			return err
		}
		res, err = p.produceOn(ctx, h, t, req, partitions)
		return err
	}, groupCall{Kind: callProduce, Produce: &req, partitions: partitions}, func(a groupAnswer) error {
		if a.Produce == nil || len(a.Produce.Results) != len(req.Records) {
			return fmt.Errorf("data group %d: a produce answer without its results", g)
		}
		res = *a.Produce
		return nil
	})
	return res, err
}

// appendInGroup appends a in data group g: here when this node leads it,
// else at its leader.
func (n *Node) appendInGroup(ctx context.Context, p *producer, g uint64, a fsm.Append, checked appendChecks) ([]int64, error) {
	var bases []int64
	err := n.inGroup(ctx, g, func(h groupHandle) error {
		var err error
		bases, err = p.appendOn(ctx, h, a, checked)
		return err
	}, groupCall{Kind: callAppend, Append: &a}, func(ans groupAnswer) error {
		if len(ans.Bases) != len(a.Batches) || ans.BatchErrs != nil && len(ans.BatchErrs) != len(a.Batches) {
			return fmt.Errorf("data group %d: an append answer without its offsets", g)
		}
		bases = ans.Bases
		if ans.BatchErrs != nil {
			pe := &backend.PartialAppendError{Offsets: bases, Errs: make([]error, len(bases))}
			for i, w := range ans.BatchErrs {
				if w != nil {
					pe.Errs[i] = w.decode()
				}
			}
			return pe
		}
		return nil
	})
	return bases, err
}

// inGroup runs local on this node's replica of group g when it leads it,
// else sends call to the node that does and hands its answer to remote,
// following the answers' leader hints, while the group has no reachable
// leader for at most groupCallWait.
func (n *Node) inGroup(ctx context.Context, g uint64, local func(groupHandle) error, call groupCall, remote func(groupAnswer) error) error {
	if g == 0 {
		return local(n.metaGroup())
	}
	deadline := time.Now().Add(groupCallWait)
	hint := ""
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if time.Now().After(deadline) {
				return last
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w: %v (data group %d: %v)", backend.ErrTimeout, ctx.Err(), g, last)
			case <-time.After(min(time.Duration(attempt)*20*time.Millisecond, 200*time.Millisecond)):
			}
		}
		dg := n.dataGroup(g)
		if dg != nil && dg.raft.State() == raft.Leader {
			err := local(dg.handle(n))
			if err == nil && call.Kind != callRead {
				n.noteGroupWrite(ctx, g, dg.fsm.AppliedIndex())
			}
			if !errors.Is(err, backend.ErrNotLeader) {
				return err
			}
			last = err
			continue
		}
		target := hint
		if target == "" && dg != nil {
			_, id := dg.raft.LeaderWithID()
			target = string(id)
		}
		if target == "" {
			target = n.groupReplica(g, attempt)
		}
		if target == "" || target == n.cfg.NodeID {
			last = fmt.Errorf("%w: data group %d has no leader this node knows", backend.ErrNotLeader, g)
			hint = ""
			continue
		}
		call = call.sendable()
		ans, err := n.callGroup(ctx, target, g, call)
		hint = ""
		switch {
		case errors.Is(err, transport.ErrCallUnanswered):
			// The leader may have appended it: the outcome is unknown,
			// and a retry elsewhere could append it twice.
			return fmt.Errorf("%w: data group %d at %s: %v", backend.ErrTimeout, g, target, err)
		case err != nil:
			last = fmt.Errorf("%w: data group %d at %s: %v", backend.ErrNotLeader, g, target, err)
			if errors.Is(err, transport.ErrCallRefused) {
				// A node that cannot read the binary form (restarted
				// with an earlier build after it registered the level)
				// refuses it: the next attempts go in JSON, which every
				// build reads.
				call.jsonOnly = true
			}
		case ans.Err != nil && errors.Is(ans.Err.decode(), backend.ErrNotLeader):
			last, hint = ans.Err.decode(), ans.Leader
		case ans.Err != nil:
			return ans.Err.decode()
		default:
			if err := remote(ans); err != nil {
				return err
			}
			// The write is answered without waiting for this node's
			// replica of the group to apply it: the replica learns the
			// commit index only from its leader's next append or
			// heartbeat (a tenth of the heartbeat timeout later, when
			// nothing else is written), and one call in flight would
			// wait that long each time. Reads through this node wait for
			// the write instead, or go to another replica: the group
			// floor noted here (read_floor.go).
			if call.Kind != callRead {
				n.noteGroupWrite(ctx, g, ans.Applied)
			}
			return nil
		}
	}
}

// groupReplica is a replica of group g to ask for its leader: the
// table's replicas in turn, the preferred leader first.
func (n *Node) groupReplica(g uint64, attempt int) string {
	for _, dg := range n.fsm.DataGroups().Groups {
		if dg.ID == g && len(dg.Replicas) > 0 {
			return dg.Replicas[attempt%len(dg.Replicas)]
		}
	}
	return ""
}

// callGroup sends call for group g to node id over the Raft port.
func (n *Node) callGroup(ctx context.Context, id string, g uint64, call groupCall) (groupAnswer, error) {
	addr, err := n.raftAddress(id)
	if err != nil {
		return groupAnswer{}, err
	}
	return n.callGroupAt(ctx, addr, id, g, call)
}

// callGroupAt is callGroup to node id at the Raft address addr.
func (n *Node) callGroupAt(ctx context.Context, addr raft.ServerAddress, id string, g uint64, call groupCall) (groupAnswer, error) {
	call.MetaIndex = n.fsm.AppliedIndex()
	req, err := encodeCall(call, !call.jsonOnly && binaryCall(call) && n.binaryCalls())
	if err != nil {
		return groupAnswer{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, n.cfg.ApplyTimeout+time.Second)
	defer cancel()
	out, err := n.stores.port.Call(cctx, string(addr), g, req)
	if err != nil {
		return groupAnswer{}, err
	}
	ans, err := decodeAnswer(out)
	if err != nil {
		return groupAnswer{}, fmt.Errorf("data group %d: answer from %s: %w", g, id, err)
	}
	return ans, nil
}

// binaryCalls reports whether every member understands the binary form
// of calls (call_binary.go): the cluster is at fsm.BinaryCallsLevel.
func (n *Node) binaryCalls() bool {
	level, err := n.featureLevel()
	return err == nil && level >= fsm.BinaryCallsLevel
}

// answerCall answers a call for group g from another node
// (transport.Port.HandleCalls), in the form it came in (call_binary.go).
func (n *Node) answerCall(ctx context.Context, peer string, g uint64, req []byte) ([]byte, error) {
	call, err := decodeCall(req)
	if err != nil {
		return nil, fmt.Errorf("%w: call: %v", backend.ErrInvalidArgument, err)
	}
	return encodeAnswer(n.answerGroupCall(ctx, peer, g, call), isBinary(req))
}

// answerGroupCall is answerCall's answer to call.
func (n *Node) answerGroupCall(ctx context.Context, peer string, g uint64, call groupCall) groupAnswer {
	var ans groupAnswer
	dg := n.dataGroup(g)
	if call.Kind == callConverge {
		// From the meta leader to a leader of g the table no longer
		// lists, whose meta state may have stopped where it was removed:
		// no meta index to wait for.
		switch {
		case dg == nil || call.Converge == nil || dg.raft.State() != raft.Leader:
			ans.Err = encodeWireError(fmt.Errorf("%w: data group %d", backend.ErrNotLeader, g))
		case slices.Contains(call.Converge.Replicas, n.cfg.NodeID):
			// Listed after all: this node's own runner converges.
		default:
			if err := n.data.handOver(dg, *call.Converge); err != nil {
				ans.Err = encodeWireError(err)
			}
		}
		return ans
	}
	if err := NewBackend(n).AwaitApplied(ctx, call.MetaIndex, groupCallWait); err != nil {
		ans.Err = encodeWireError(err)
		return ans
	}
	if call.Kind == callLeader {
		if peer != "" {
			call.From = peer // the node the session proved
		}
		return n.answerLeaderCall(ctx, call)
	}
	if g == 0 {
		if a, ok := n.answerMetaCall(ctx, call); ok {
			return a
		}
	}
	if isCutCall(call.Kind) {
		return n.answerCutCall(ctx, peer, g, dg, call)
	}
	if dg != nil && dg.left.Load() && dg.raft.State() != raft.Leader {
		// A replica the table moved away stops where the group removed
		// it: it answers as one holding no replica. (While it still
		// leads, it holds every write; it hands its leadership to a
		// listed voter, step.)
		dg = nil
	}
	// A read any replica may answer (not one at the group's leader).
	replicaRead := dg != nil && (call.Kind == callRead && call.Read != nil && !call.Read.Leader || call.Kind == callQueueRead ||
		call.Kind == callGroupRead && call.GroupRead != nil && !call.GroupRead.leaderRead())
	if replicaRead && !n.data.servesNow(dg) {
		// A replica that has not caught up, or lost touch with its
		// group, answers as one holding none: the caller asks another.
		ans.Err = encodeWireError(fmt.Errorf("%w: this node's replica of data group %d does not serve reads now", backend.ErrNotLeader, g))
		return ans
	}
	if replicaRead && call.MinApplied > 0 && dg.fsm.AppliedIndex() < call.MinApplied {
		// The caller saw a write of the group acknowledged at
		// MinApplied: a replica that has not applied it does not answer.
		if dg.awaitApplied(ctx, call.MinApplied, floorWait); dg.fsm.AppliedIndex() < call.MinApplied {
			_, id := dg.raft.LeaderWithID()
			ans.Err, ans.Leader = encodeWireError(fmt.Errorf("%w: data group %d applied %d here, below %d", backend.ErrNotLeader, g, dg.fsm.AppliedIndex(), call.MinApplied)), string(id)
			return ans
		}
	}
	switch {
	case dg != nil && call.Kind == callRead && call.Read != nil && call.Read.Leader && !dg.confirmLeader():
		_, id := dg.raft.LeaderWithID()
		ans.Err, ans.Leader = encodeWireError(fmt.Errorf("%w: data group %d", backend.ErrNotLeader, g)), string(id)
	case dg != nil && call.Kind == callRead && call.Read != nil:
		// Any replica reads what it applied, as a follower serves reads.
		r := call.Read
		if r.Leader {
			// The leader adopts a topic just created first (the caller's
			// meta index, applied above, places it here).
			if _, err := dg.handle(n).topic(r.Topic); err != nil {
				ans.Err = encodeWireError(err)
				break
			}
		}
		if r.MaxBytes == 0 { // the bounds only, and an offset for a time
			part, err := groupPartition(n.fsm, dg.fsm, r.Topic, r.Partition)
			if err != nil {
				ans.Err = encodeWireError(err)
				break
			}
			ans.Read = &readAnswer{LogStart: part.Log().StartOffset(), End: part.Log().EndOffset()}
			if r.TimestampMs != nil {
				if ans.Read.Offset, err = part.Log().OffsetForTime(*r.TimestampMs); err != nil {
					ans = groupAnswer{Err: encodeWireError(fromStorage(err))}
				}
			}
			break
		}
		// Charged to the answer budget until written (remote_answers.go).
		charge, err := n.chargeRemoteAnswer(ctx, peer, r.MaxBytes)
		if err != nil {
			ans.Err = encodeWireError(err)
			break
		}
		res, err := readBatches(n.fsm, dg.fsm, r.Topic, r.Partition, r.Offset, r.MaxBytes, r.MaxRecords)
		if err != nil {
			ans.Err = encodeWireError(err)
			break
		}
		if charge != nil {
			charge.Trim(remoteAnswerCopies * int64(len(res.Batches)))
		}
		ans.Read = &readAnswer{Batches: res.Batches, LogStart: res.LogStartOffset, End: res.EndOffset}
	case dg != nil && call.Kind == callQueueRead && call.QueueRead != nil:
		// Any replica reads its copy of a queue group, as it serves reads.
		a, err := readQueue(dg.fsm, *call.QueueRead)
		if err == nil {
			ans.Result, err = json.Marshal(a)
		}
		if err != nil {
			ans.Err = encodeWireError(err)
		}
	case dg != nil && call.Kind == callGroupRead && call.GroupRead != nil && call.GroupRead.Leader && dg.raft.State() == raft.Leader && !dg.confirmLeader():
		_, id := dg.raft.LeaderWithID()
		ans.Err, ans.Leader = encodeWireError(fmt.Errorf("%w: data group %d", backend.ErrNotLeader, g)), string(id)
	case dg != nil && call.Kind == callGroupRead && call.GroupRead != nil && !call.GroupRead.leaderRead():
		// Any replica reads its consumer groups, as it serves reads.
		ans = answerGroupRead(ctx, dg.fsm, dg.applied, dg.leadsReady(), *call.GroupRead)
	case dg != nil && call.Kind == callGroupLeader:
		ans = answerGroupLeader(dg, n.cfg.NodeID)
	case dg != nil && call.Kind == callSize:
		var err error
		if ans.Result, err = json.Marshal(fsmBytes(dg.fsm)); err != nil {
			ans.Err = encodeWireError(err)
		}
	case dg != nil && call.Kind == callConfig:
		var err error
		if ans.Result, err = json.Marshal(configVoters(dg.raft)); err != nil {
			ans.Err = encodeWireError(err)
		}
	case dg != nil && call.Kind == callMembers && dg.raft.State() == raft.Leader:
		// Only the leader answers: its configuration, and whether it is
		// committed (retire.go).
		a, err := leaderMembers(dg)
		if err == nil {
			ans.Result, err = json.Marshal(a)
		}
		if err != nil {
			ans.Err = encodeWireError(err)
		}
	case dg == nil:
		ans.Err = encodeWireError(fmt.Errorf("%w: this node holds no replica of data group %d", backend.ErrNotLeader, g))
	case dg.raft.State() != raft.Leader:
		_, id := dg.raft.LeaderWithID()
		ans.Err, ans.Leader = encodeWireError(fmt.Errorf("%w: data group %d", backend.ErrNotLeader, g)), string(id)
	default:
		p := &producer{n: n}
		h := dg.handle(n)
		var err error
		switch {
		case call.Kind == callProduce && call.Produce != nil:
			var t *fsm.Topic
			if t, err = h.topicFor(call.Produce.Topic, partitionsNeeded(*call.Produce, nil)); err == nil {
				var res backend.ProduceResult
				res, err = p.produceOn(ctx, h, t, *call.Produce, nil)
				ans.Produce = &res
			}
		case call.Kind == callAppend && call.Append != nil:
			// Sent by another node: nothing of it is checked yet.
			ans.Bases, err = p.appendOn(ctx, h, *call.Append, 0)
		case call.Kind == callQueue:
			var res any
			if res, err = proposeQueueOn(ctx, h, call.Queue); err == nil {
				ans.Result, err = json.Marshal(res)
			}
		case call.Kind == callGroupCmd && call.Group != nil:
			ans = NewBackend(n).answerGroupCmd(ctx, h, call.Group)
			if ans.Err != nil {
				err = ans.Err.decode()
			}
		case call.Kind == callGroupRead && call.GroupRead != nil && call.GroupRead.Op == groupReadExternal:
			// The group's Kafka members, which the coordinator on the
			// home's leader holds (ExternalGroup).
			ans.Result, err = json.Marshal(n.externalMembers(call.GroupRead.Group))
		case call.Kind == callGroupRead && call.GroupRead != nil:
			// A read at the leader, which confirmed its leadership
			// above (ConsumerGroupLeader).
			ans = answerGroupRead(ctx, dg.fsm, dg.applied, true, *call.GroupRead)
			if ans.Err != nil {
				err = ans.Err.decode()
			}
		default:
			err = fmt.Errorf("%w: call of kind %q", backend.ErrInvalidArgument, call.Kind)
		}
		var pe *backend.PartialAppendError
		switch {
		case call.Kind == callAppend && errors.As(err, &pe):
			ans = groupAnswer{Bases: pe.Offsets, BatchErrs: make([]*wireError, len(pe.Offsets))}
			for i, e := range pe.Errs {
				if e != nil {
					ans.BatchErrs[i] = encodeWireError(e)
				}
			}
		case err != nil:
			ans = groupAnswer{Err: encodeWireError(err)}
		default:
			ans.Applied = dg.fsm.AppliedIndex()
		}
	}
	return ans
}
