package replication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/group"
	"github.com/logd-dev/logd/replication/fsm"
	"github.com/logd-dev/logd/replication/transport"
)

// Consumer groups in data groups (docs/architecture.md, "Consumer
// groups"; from fsm.HashedGroupsLevel). A consumer group's state lives in
// its home: the meta group for a group from before the level (and for the
// groups logd keeps for itself, group.Internal), else the data group its
// name hashed to when it first appeared, which the meta group records
// (fsm.GroupPlace) and never changes. This node routes every command on a
// group to its home's leader: here when this node leads it, else as a
// call over the Raft port (callGroupCmd), from any node. The home's
// leader proposes it, in a data group wrapped with the views of the
// topics it needs and the ends of the partitions it names that its home
// does not host (fsm.GroupHosted): a data group's Apply never reads the
// meta group. Reads of a group read its home: this node's replica when it
// serves, else a replica of the home (callGroupRead).

// Calls for consumer groups.
const (
	// callGroupCmd proposes a consumer group command in the group's home,
	// at its leader (the meta group's for home 0); the answer's Result is
	// the command's result as JSON.
	callGroupCmd = "group"
	// callGroupRead reads a consumer group at a replica of its home.
	callGroupRead = "group-read"
	// callGroupPlace asks the meta leader for a group's home, which it
	// records the first time (fsm.GroupPlace); the answer's Result is the
	// home.
	callGroupPlace = "group-place"
	// callMetaIndex asks the meta leader for its read index
	// (Backend.ReadIndex), in the answer's Applied.
	callMetaIndex = "meta-index"
	// callGroupLeader asks any replica of a data group for the leader it
	// knows, in the answer's Leader.
	callGroupLeader = "group-leader"
)

// groupCmdCall is a consumer group command a callGroupCmd carries: its
// kind and its body (the fsm command, as JSON).
type groupCmdCall struct {
	Kind    fsm.CommandType `json:"kind"`
	Group   string          `json:"group"`
	Command json.RawMessage `json:"command"`
}

// The reads a callGroupRead asks for.
const (
	groupReadOne   = "group"
	groupReadAll   = "groups"
	groupReadFence = "fence"
	groupReadCheck = "check-fetch"
	// groupReadExternal asks the home's leader for the group's Kafka
	// members (ExternalGroup).
	groupReadExternal = "external"
)

// groupReadCall asks a replica of a group's home for the group (Op
// groupReadOne), every group it holds (groupReadAll), the group's fence
// at Now (groupReadFence), or whether a member may fetch (groupReadCheck:
// the replica waits up to WaitMs for what the member names).
type groupReadCall struct {
	Op string `json:"op"`
	// Leader: only the home's leader answers, once it confirmed its
	// leadership (ConsumerGroupLeader), as for an external read.
	Leader bool                     `json:"leader,omitempty"`
	Group  string                   `json:"group,omitempty"`
	Now    int64                    `json:"now,omitempty"`
	Check  *backend.GroupFetchCheck `json:"check,omitempty"`
	WaitMs int64                    `json:"wait_ms,omitempty"`
}

// groupReadAnswer is a groupReadCall's answer.
type groupReadAnswer struct {
	Group      *group.ConsumerGroup   `json:"group,omitempty"`
	Groups     []*group.ConsumerGroup `json:"groups,omitempty"`
	Generation int64                  `json:"generation,omitempty"`
	Live       int                    `json:"live,omitempty"`
	Exists     bool                   `json:"exists,omitempty"`
}

// groupHomes caches the homes this node learnt from the meta leader
// before its own replica of the meta group applied them: a home never
// changes, so a cached one is never stale.
type groupHomes struct {
	m sync.Map // group name -> uint64
}

// RoutesGroups reports whether this node routes consumer group commands
// to their homes itself: once there are data groups and every member
// applies group-place and group-hosted (fsm.HashedGroupsLevel). The server
// then serves a group's writes on the node that receives them, rather
// than forwarding them to the meta leader. A group that has a home
// recorded is routed there whatever this says.
func (n *Node) RoutesGroups() bool {
	if !n.fsm.HasDataGroups() {
		return false
	}
	level, err := n.featureLevel()
	return err == nil && level >= fsm.HashedGroupsLevel
}

// knownHome returns the home of a group as this node knows it: recorded
// in its replica of the meta group or learnt from the meta leader; a
// group logd keeps for itself is at home 0. ok is false when it knows
// none.
func (n *Node) knownHome(name string) (uint64, bool) {
	if group.Internal(name) {
		return 0, true
	}
	if h, ok := n.fsm.GroupHome(name); ok {
		return h, true
	}
	if h, ok := n.homes.m.Load(name); ok {
		return h.(uint64), true
	}
	return 0, false
}

// GroupHome is the home of a group as this node knows it (readHome).
func (n *Node) GroupHome(name string) uint64 { return n.readHome(name) }

// readHome is the home to read a group from: the one known, else 0 (a
// group from before the level, or none: a node that has not applied the
// group's placement does not know the group yet, as a follower that has
// not applied a write).
func (n *Node) readHome(name string) uint64 {
	h, _ := n.knownHome(name)
	return h
}

// groupHome returns the home to route a command on a group to, placing a
// new group (once there are data groups and every member applies it):
// one the meta group holds unplaced stays there (the meta group refuses
// the command if it was placed since, naming the home).
func (n *Node) groupHome(ctx context.Context, name string) (uint64, error) {
	if h, ok := n.knownHome(name); ok {
		return h, nil
	}
	if _, err := n.fsm.ConsumerGroup(name); err == nil || !n.RoutesGroups() {
		return 0, nil
	}
	return n.placeGroup(ctx, name)
}

// tentativeHome is the home a group has, or would get if placed now
// (Kafka's FindCoordinator, which places nothing): the coordinator it
// names places the group at its first JoinGroup or OffsetCommit, and a
// group placed elsewhere by then is NOT_COORDINATOR there, so the client
// asks again.
func (n *Node) tentativeHome(name string) uint64 {
	if h, ok := n.knownHome(name); ok {
		return h
	}
	if _, err := n.fsm.ConsumerGroup(name); err == nil || !n.RoutesGroups() {
		return 0
	}
	return fsm.HashedHome(name, n.fsm.DataGroups())
}

// placeGroup asks the meta group for a group's home, which it records the
// first time: proposed here on the meta leader, else asked of it. The
// answer is kept (groupHomes), and this node waits a little for its
// replica of the meta group to apply it, so its own reads route the
// group there too.
func (n *Node) placeGroup(ctx context.Context, name string) (uint64, error) {
	var home, applied uint64
	data, err := fsm.EncodeJSON(fsm.CmdGroupPlace, n.cfg.Now().UnixNano(), fsm.GroupPlace{Group: name})
	if err != nil {
		return 0, err
	}
	err = n.inMeta(ctx, func() error {
		res, err := n.propose(ctx, data)
		if err != nil {
			return err
		}
		h, ok := res.(uint64)
		if !ok {
			return fmt.Errorf("place group %q: unexpected result %T", name, res)
		}
		home = h
		return nil
	}, groupCall{Kind: callGroupPlace, Group: &groupCmdCall{Group: name}}, func(a groupAnswer) error {
		applied = a.Applied
		return json.Unmarshal(a.Result, &home)
	})
	if err != nil {
		return 0, fmt.Errorf("place consumer group %q: %w", name, err)
	}
	n.homes.m.Store(name, home)
	if applied > 0 {
		_ = NewBackend(n).AwaitApplied(ctx, applied, readYourWritesWait)
	}
	return home, nil
}

// inMeta runs local when this node leads the meta group, else sends call
// to the meta leader and hands its answer to remote, following its
// leader hints while no leader is known, for at most groupCallWait.
func (n *Node) inMeta(ctx context.Context, local func() error, call groupCall, remote func(groupAnswer) error) error {
	deadline := time.Now().Add(groupCallWait)
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if time.Now().After(deadline) {
				return last
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w: %v (the meta group: %v)", backend.ErrTimeout, ctx.Err(), last)
			case <-time.After(min(time.Duration(attempt)*20*time.Millisecond, 200*time.Millisecond)):
			}
		}
		if n.IsLeader() {
			err := local()
			if !errors.Is(err, backend.ErrNotLeader) {
				return err
			}
			last = err
			continue
		}
		addr, id := n.raft.LeaderWithID()
		if addr == "" || string(id) == n.cfg.NodeID || n.stores.port == nil {
			last = fmt.Errorf("%w: the meta group has no leader this node knows", backend.ErrNotLeader)
			continue
		}
		ans, err := n.callGroupAt(ctx, addr, string(id), 0, call)
		switch {
		case errors.Is(err, transport.ErrCallUnanswered):
			return fmt.Errorf("%w: the meta group at %s: %v", backend.ErrTimeout, id, err)
		case err != nil:
			last = fmt.Errorf("%w: the meta group at %s: %v", backend.ErrNotLeader, id, err)
		case ans.Err != nil && errors.Is(ans.Err.decode(), backend.ErrNotLeader):
			last = ans.Err.decode()
		case ans.Err != nil:
			return ans.Err.decode()
		default:
			return remote(ans)
		}
	}
}

// freshMeta has this node's replica of the meta group apply what the meta
// leader had committed when asked (its read index), waiting at most
// readYourWritesWait: a group command that names a topic this node does
// not know yet (created through another node just before) then sees it.
func (n *Node) freshMeta(ctx context.Context) {
	b := NewBackend(n)
	var index uint64
	err := n.inMeta(ctx, func() error {
		var err error
		index, err = b.ReadIndex()
		return err
	}, groupCall{Kind: callMetaIndex}, func(a groupAnswer) error {
		index = a.Applied
		return nil
	})
	if err == nil && index > 0 {
		_ = b.AwaitApplied(ctx, index, readYourWritesWait)
	}
}

// routeGroup proposes c, a command of kind t on the named group, in the
// group's home and returns its result: Apply's for a command proposed
// here; for one answered by another node, a group.Assignment for a join
// or a heartbeat, an int64 for an auto-reset, nil otherwise.
func (b *Backend) routeGroup(ctx context.Context, t fsm.CommandType, name string, c any) (any, error) {
	if err := group.ValidateName("group", name); err != nil {
		return nil, err
	}
	home, err := b.groupHome(ctx, name)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t, err)
	}
	call := groupCall{Kind: callGroupCmd, Group: &groupCmdCall{Kind: t, Group: name, Command: body}}
	for attempt := 0; ; attempt++ {
		var out any
		local := func(h groupHandle) error {
			var err error
			out, err = b.proposeGroupOn(ctx, h, t, name, c)
			return err
		}
		remote := func(a groupAnswer) error {
			var err error
			if out, err = groupResult(t, a.Result); err == nil && home == 0 && a.Applied > 0 {
				// Reads through this node see the write (a data
				// group's wait is inGroup's).
				_ = b.AwaitApplied(ctx, a.Applied, readYourWritesWait)
			}
			return err
		}
		if home == 0 {
			err = b.inMeta(ctx, func() error { return local(b.metaGroup()) }, call, remote)
		} else {
			err = b.inGroup(ctx, home, local, call, remote)
		}
		var ge *fsm.GroupElsewhereError
		if attempt == 0 && errors.As(err, &ge) && ge.Home != home {
			// Placed since this node looked (by another node that had
			// not applied the group's creation here): its home now.
			b.homes.m.Store(name, ge.Home)
			home = ge.Home
			continue
		}
		return out, err
	}
}

// groupResult reads a command's result as a call's answer carries it.
func groupResult(t fsm.CommandType, res json.RawMessage) (any, error) {
	if len(res) == 0 || string(res) == "null" {
		return nil, nil
	}
	switch t {
	case fsm.CmdGroupJoin, fsm.CmdGroupHeartbeat:
		var a group.Assignment
		err := json.Unmarshal(res, &a)
		return a, err
	case fsm.CmdGroupAutoReset:
		var off int64
		err := json.Unmarshal(res, &off)
		return off, err
	}
	return nil, nil
}

// groupCmdDecoders decode the commands a callGroupCmd may carry, by kind.
var groupCmdDecoders = map[fsm.CommandType]func(json.RawMessage) (any, error){
	fsm.CmdGroupJoin:         decodeAs[fsm.GroupJoin],
	fsm.CmdGroupHeartbeat:    decodeAs[fsm.GroupHeartbeat],
	fsm.CmdGroupLeave:        decodeAs[fsm.GroupLeave],
	fsm.CmdGroupCommit:       decodeAs[fsm.GroupCommit],
	fsm.CmdGroupResetOffsets: decodeAs[fsm.GroupResetOffsets],
	fsm.CmdGroupAutoReset:    decodeAs[fsm.GroupAutoReset],
	fsm.CmdGroupDelete:       decodeAs[fsm.GroupDelete],
	fsm.CmdGroupSetOffsets:   decodeAs[fsm.GroupSetOffsets],
}

// decodeAs decodes a T from JSON.
func decodeAs[T any](raw json.RawMessage) (any, error) {
	var v T
	err := json.Unmarshal(raw, &v)
	return v, err
}

// decodeGroupCmd is the command a callGroupCmd carries.
func decodeGroupCmd(c *groupCmdCall) (any, error) {
	decode, ok := groupCmdDecoders[c.Kind]
	if !ok {
		return nil, fmt.Errorf("%w: not a consumer group command: %s", backend.ErrInvalidArgument, c.Kind)
	}
	v, err := decode(c.Command)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", backend.ErrInvalidArgument, c.Kind, err)
	}
	return v, nil
}

// groupOffsets are the offsets a group command names (nil for kinds
// without), and the topics it names.
func groupOffsets(c any) ([]group.OffsetCommit, []string) {
	var offsets []group.OffsetCommit
	switch c := c.(type) {
	case fsm.GroupJoin:
		return nil, c.Topics
	case fsm.GroupCommit:
		offsets = c.Offsets
	case fsm.GroupResetOffsets:
		offsets = c.Offsets
	case fsm.GroupSetOffsets:
		offsets = c.Offsets
	case fsm.GroupAutoReset:
		offsets = []group.OffsetCommit{{TopicPartition: c.Partition, Offset: c.To}}
	}
	var topics []string
	for _, o := range offsets {
		if !slices.Contains(topics, o.Topic) {
			topics = append(topics, o.Topic)
		}
	}
	return offsets, topics
}

// withEnds returns c with ends set (kinds that carry them).
func withEnds(c any, ends []fsm.PartitionEnd) any {
	switch v := c.(type) {
	case fsm.GroupCommit:
		v.Ends = ends
		return v
	case fsm.GroupResetOffsets:
		v.Ends = ends
		return v
	case fsm.GroupSetOffsets:
		v.Ends = ends
		return v
	case fsm.GroupAutoReset:
		v.Ends = ends
		return v
	}
	return c
}

// proposeGroupOn proposes c, a command of kind t on the named group, in
// the group h (this node leads it): the meta group as before the level,
// with the ends of the partitions data groups host; a data group wrapped
// in a group-hosted command (hostedCommand). A deletion first checks the
// group's Kafka members, which this node's coordinator holds while it
// leads the group's home. Checked against a copy of the applied state
// first, when this node's replica applied its whole log, so a refused
// command never reaches the Raft log.
func (b *Backend) proposeGroupOn(ctx context.Context, h groupHandle, t fsm.CommandType, name string, c any) (any, error) {
	if t == fsm.CmdGroupDelete {
		if n := len(b.externalMembers(name).Members); n > 0 {
			return nil, fmt.Errorf("%w: group %q has %d live Kafka members", group.ErrConsumerGroupNotEmpty, name, n)
		}
	}
	offsets, named := groupOffsets(c)
	if h.id != 0 && !b.IsLeader() && b.metaLacks(named, offsets) {
		// Created or grown through another node just before: this node
		// applies what the meta leader committed first.
		b.freshMeta(ctx)
	}
	ends, err := b.endsFor(ctx, h.id, offsets)
	if err != nil {
		return nil, err
	}
	c = withEnds(c, ends)
	now := max(b.cfg.Now().UnixNano(), h.fsm.Now())
	data, err := encodeGroup(t, now, c)
	if err != nil {
		return nil, err
	}
	dt, dc := t, c
	caughtUp := b.fsm.AppliedIndex() >= b.raft.LastIndex()
	if h.id != 0 {
		dg := b.dataGroup(h.id)
		if dg == nil {
			return nil, fmt.Errorf("%w: data group %d", backend.ErrNotLeader, h.id)
		}
		wrapped, wdata, err := b.hostedCommand(dg, name, named, now, data)
		if err != nil {
			return nil, err
		}
		dt, dc, data = fsm.CmdGroupHosted, wrapped, wdata
		caughtUp = dg.fsm.AppliedIndex() >= dg.raft.LastIndex()
	}
	// The dry run is only an early refusal; it needs a state machine that
	// has applied the whole log. Apply checks the same rules anyway.
	if caughtUp {
		if err, ok := h.fsm.DryRunGroup(dt, name, now, dc).(error); ok {
			return nil, err
		}
	}
	return h.propose(ctx, data)
}

// encodeGroup encodes a group command of kind t stamped with now.
func encodeGroup(t fsm.CommandType, now int64, c any) ([]byte, error) {
	if so, ok := c.(fsm.GroupSetOffsets); ok {
		return fsm.EncodeGroupSetOffsets(now, so), nil
	}
	return fsm.EncodeJSON(t, now, c)
}

// metaLacks reports whether this node's replica of the meta group does
// not know a topic a group command names, or a partition it names.
func (b *Backend) metaLacks(named []string, offsets []group.OffsetCommit) bool {
	for _, name := range named {
		if _, err := b.fsm.Topic(name); err != nil {
			return true
		}
	}
	for _, o := range offsets {
		if t, err := b.fsm.Topic(o.Topic); err == nil && int(o.Partition) >= len(t.Partitions) {
			return true
		}
	}
	return false
}

// hostedCommand wraps data, an encoded command on the named group, for
// the group's home dg: with the views of the topics the command names
// and of those the group names whose view in dg's catalog differs from
// this node's replica of the meta group (read together with its index:
// fsm.FSM.GroupTopicViews).
func (b *Backend) hostedCommand(dg *dataGroup, name string, named []string, now int64, data []byte) (fsm.GroupHosted, []byte, error) {
	names := slices.Clone(named)
	if g, err := dg.fsm.ConsumerGroup(name); err == nil {
		for _, t := range g.KnownTopics() {
			if !slices.Contains(names, t) {
				names = append(names, t)
			}
		}
	}
	index, views := b.fsm.GroupTopicViews(names)
	out := views[:0]
	for _, v := range views {
		if slices.Contains(named, v.Name) {
			out = append(out, v)
			continue
		}
		if have, ok := dg.fsm.GroupTopicView(v.Name); !ok || have != v {
			out = append(out, v)
		}
	}
	c, wdata, err := fsm.NewGroupHosted(now, index, out, data)
	return c, wdata, err
}

// endsFor returns the ends of the partitions of offsets that the group
// command's home h does not host, for the command to carry
// (fsm.PartitionEnd): a data group hosts the partitions its topics'
// placements put in it; the meta group those of the topics without one.
// A partition of the meta group (for a group in a data group) has its end
// from this node's replica of the meta group, waited for a little when it
// is below the offset; one of a data group from this node's replica of
// it when that caught up and its end is at or above the offset, else from
// the group's leader once it confirmed its leadership, so an offset a
// consumer read from the leader is never refused as above the end.
func (b *Backend) endsFor(ctx context.Context, h uint64, offsets []group.OffsetCommit) ([]fsm.PartitionEnd, error) {
	var need []group.OffsetCommit
	var groups []uint64
	for _, o := range offsets {
		t, err := b.fsm.Topic(o.Topic)
		if err != nil || o.Partition < 0 || int(o.Partition) >= len(t.Partitions) {
			continue // left to the group's own checks
		}
		g := t.PartitionGroup(o.Partition)
		if g == h || slices.ContainsFunc(need, func(x group.OffsetCommit) bool { return x.TopicPartition == o.TopicPartition }) {
			continue
		}
		need = append(need, o)
		groups = append(groups, g)
	}
	if len(need) == 0 {
		return nil, nil
	}
	if h == 0 {
		if err := b.CheckPlacedGroups(); err != nil {
			return nil, err
		}
	}
	ends := make([]fsm.PartitionEnd, len(need))
	errs := inParallel(len(need), func(i int) error {
		o := need[i]
		ends[i] = fsm.PartitionEnd{Topic: o.Topic, Partition: o.Partition}
		if groups[i] == 0 {
			ends[i].End = b.metaEnd(ctx, o.Topic, o.Partition, o.Offset)
			return nil
		}
		if end, ok := b.localEnd(o.Topic, o.Partition); ok && end >= o.Offset {
			ends[i].End = end
			return nil
		}
		bounds, err := b.OffsetsLeader(ctx, o.Topic, o.Partition)
		if err != nil {
			return fmt.Errorf("the end of %s-%d: %w", o.Topic, o.Partition, err)
		}
		ends[i].End = bounds.End
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ends, nil
}

// metaEndWait bounds how long a group command on a data group waits for
// this node's replica of the meta group to reach an offset a member names
// in one of the meta group's partitions.
const metaEndWait = time.Second

// metaEnd is the end of a partition of the meta group in this node's
// replica, once it is at least atLeast or metaEndWait passed.
func (b *Backend) metaEnd(ctx context.Context, topic string, p int32, atLeast int64) int64 {
	var end int64
	_ = b.awaitApplies(ctx, metaEndWait, func() string {
		part, err := b.fsm.Partition(topic, p)
		if err != nil {
			return ""
		}
		if end = part.Log().EndOffset(); end >= atLeast {
			return ""
		}
		return fmt.Sprintf("offset %d of %s-%d", atLeast, topic, p)
	})
	return end
}

// answerGroupCall answers a callGroupCmd, callGroupPlace or callMetaIndex
// for the meta group (g 0) on this node; ok is false for another call.
func (n *Node) answerMetaCall(ctx context.Context, call groupCall) (groupAnswer, bool) {
	var ans groupAnswer
	b := NewBackend(n)
	switch {
	case call.Kind == callGroupPlace && call.Group != nil:
		if !n.IsLeader() {
			break
		}
		home, err := n.placeGroup(ctx, call.Group.Group)
		if err == nil {
			ans.Result, err = json.Marshal(home)
		}
		if err != nil {
			return groupAnswer{Err: encodeWireError(err)}, true
		}
		ans.Applied = n.fsm.AppliedIndex()
		return ans, true
	case call.Kind == callMetaIndex:
		i, err := b.ReadIndex()
		if err != nil {
			return groupAnswer{Err: encodeWireError(err)}, true
		}
		return groupAnswer{Applied: i}, true
	case call.Kind == callGroupCmd && call.Group != nil:
		if !n.IsLeader() {
			break
		}
		return b.answerGroupCmd(ctx, b.metaGroup(), call.Group), true
	case call.Kind == callGroupRead && call.GroupRead != nil:
		return answerGroupRead(ctx, n.fsm, n.applied, n.IsLeader(), *call.GroupRead), true
	default:
		return ans, false
	}
	_, id := n.raft.LeaderWithID()
	return groupAnswer{Err: encodeWireError(fmt.Errorf("%w: the meta group", backend.ErrNotLeader)), Leader: string(id)}, true
}

// answerGroupCmd proposes a callGroupCmd's command in h, which this node
// leads.
func (b *Backend) answerGroupCmd(ctx context.Context, h groupHandle, c *groupCmdCall) groupAnswer {
	cmd, err := decodeGroupCmd(c)
	var res any
	if err == nil {
		res, err = b.proposeGroupOn(ctx, h, c.Kind, c.Group, cmd)
	}
	var ans groupAnswer
	if err == nil {
		ans.Result, err = json.Marshal(res)
	}
	if err != nil {
		return groupAnswer{Err: encodeWireError(err)}
	}
	ans.Applied = h.fsm.AppliedIndex()
	return ans
}

// answerGroupRead answers a callGroupRead from f, a replica's state
// machine whose applies signal wakes, leads when the replica leads its
// group with a barrier of its term applied.
func answerGroupRead(ctx context.Context, f *fsm.FSM, signal *appliedSignal, leads bool, c groupReadCall) groupAnswer {
	a, err := readGroup(ctx, f, signal, leads, c)
	var ans groupAnswer
	if err == nil {
		ans.Result, err = json.Marshal(a)
	}
	if err != nil {
		return groupAnswer{Err: encodeWireError(err)}
	}
	// At or past the index of the state read: the caller raises its
	// floor of the group to it (askGroupRead), so that its later reads
	// never show an older state.
	ans.Applied = f.AppliedIndex()
	return ans
}

// readGroup reads c from f (answerGroupRead).
func readGroup(ctx context.Context, f *fsm.FSM, signal *appliedSignal, leads bool, c groupReadCall) (groupReadAnswer, error) {
	var a groupReadAnswer
	var err error
	switch c.Op {
	case groupReadOne:
		a.Group, err = f.ConsumerGroup(c.Group)
	case groupReadAll:
		a.Groups = f.ConsumerGroups()
	case groupReadFence:
		a.Generation, a.Live, a.Exists = f.GroupFence(c.Group, max(c.Now, f.Now()))
	case groupReadCheck:
		if c.Check == nil {
			err = fmt.Errorf("%w: a fetch check without its check", backend.ErrInvalidArgument)
			break
		}
		wait := min(time.Duration(c.WaitMs)*time.Millisecond, 5*time.Second)
		err = awaitGroupFetchOn(ctx, f, signal, leads, *c.Check, wait, func() (string, string) { return "", "" })
	default:
		err = fmt.Errorf("%w: group read %q", backend.ErrInvalidArgument, c.Op)
	}
	return a, err
}

// groupReadable reports whether this node's replica dg of a group's home
// serves reads of it now (servesNow, and the node's floor of the group):
// one that leads only once it applied a barrier of its term, so that it
// holds every command its predecessors acknowledged (a leader read of a
// group is linearizable, as the meta leader's was).
//
// A leader the table no longer lists still holds every write until it
// hands its leadership to a listed voter (it takes them all meanwhile):
// it serves too, where a follower replica the table moved away does not.
func (b *Backend) groupReadable(ctx context.Context, dg *dataGroup) bool {
	if dg.raft.State() == raft.Leader {
		if !dg.leadsReady() {
			b.data.barrier(dg)
			if !dg.leadsReady() {
				return false
			}
		}
		if dg.left.Load() {
			return b.atGroupFloor(ctx, dg)
		}
	}
	return b.data.servesNow(dg) && b.atGroupFloor(ctx, dg)
}

// readGroupIn reads c from the home g of a consumer group: this node's
// replica of g when it serves (groupReadable), else a replica of g that
// does.
//
// A read this node's replica answers raises the node's floor of g to
// what the replica had applied, so that a later read another replica
// answers never shows an older state. A replica that leads g but cannot
// serve yet, a barrier of its term not applied
// (an election just won, or a hand-over of the leadership in progress,
// which refuses barriers), is waited for, until it serves or no longer
// leads: a read through the group's leader is linearizable, and another
// replica may not hold the leader's last writes yet.
func (b *Backend) readGroupIn(ctx context.Context, g uint64, c groupReadCall) (groupReadAnswer, error) {
	if dg := b.dataGroup(g); dg != nil {
		for {
			if b.groupReadable(ctx, dg) {
				a, err := readGroup(ctx, dg.fsm, dg.applied, dg.leadsReady(), c)
				b.groupFloors.raise(g, dg.fsm.AppliedIndex())
				return a, err
			}
			if dg.raft.State() != raft.Leader {
				break
			}
			t := time.NewTimer(leaderReadRetry)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return groupReadAnswer{}, fmt.Errorf("%w: this node leads data group %d and has not applied a barrier of its term: %v", backend.ErrNotLeader, g, ctx.Err())
			}
		}
	}
	return b.askGroupRead(ctx, g, c)
}

// leaderReadRetry is how often readGroupIn looks again at a replica that
// leads its group and cannot serve yet.
const leaderReadRetry = 20 * time.Millisecond

// askGroupRead reads c from a replica of g other than this node, the
// preferred leader first: one behind what c names passes it on.
func (b *Backend) askGroupRead(ctx context.Context, g uint64, c groupReadCall) (groupReadAnswer, error) {
	var out groupReadAnswer
	err := b.askReplica(ctx, g, "", groupCall{Kind: callGroupRead, GroupRead: &c}, func(a groupAnswer) error {
		var err error
		out, err = decodeGroupRead(a)
		if errors.Is(err, backend.ErrBehind) {
			return fmt.Errorf("%w: %w", errNextReplica, err)
		}
		if err == nil && g != 0 {
			// Reads through this node never go back: its own replica,
			// read next, must first reach what this answer showed
			// (atGroupFloor), as another replica asked next must
			// (MinApplied). A node of an earlier build sends no index.
			b.groupFloors.raise(g, a.Applied)
		}
		return err
	})
	return out, err
}

// decodeGroupRead reads a callGroupRead's answer.
func decodeGroupRead(a groupAnswer) (groupReadAnswer, error) {
	var out groupReadAnswer
	if err := answerErr(a); err != nil {
		return out, err
	}
	if len(a.Result) == 0 {
		return out, fmt.Errorf("%w: a group read answer without its result", errNextReplica)
	}
	err := json.Unmarshal(a.Result, &out)
	return out, err
}

// groupReadContext bounds a read of a consumer group from another node.
func (n *Node) groupReadContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
}

// ConsumerGroup returns a copy of a consumer group's state, from its home
// (group.ErrConsumerGroupNotFound when it has none).
func (b *Backend) ConsumerGroup(name string) (*group.ConsumerGroup, error) {
	home := b.readHome(name)
	if home == 0 {
		return b.fsm.ConsumerGroup(name)
	}
	ctx, cancel := b.groupReadContext()
	defer cancel()
	a, err := b.readGroupIn(ctx, home, groupReadCall{Op: groupReadOne, Group: name})
	if err != nil {
		return nil, err
	}
	if a.Group == nil {
		return nil, fmt.Errorf("%w: %q", group.ErrConsumerGroupNotFound, name)
	}
	return a.Group, nil
}

// ConsumerGroups returns copies of every consumer group, sorted by name:
// the meta group's and those of every data group that is a group's home
// (as this node's replica of the meta group knows them), each read from
// this node's replica when it serves, else from a replica of the group (a
// data group none of whose replicas answers is left out, and logged).
func (b *Backend) ConsumerGroups() []*group.ConsumerGroup {
	out := b.fsm.ConsumerGroups()
	homes := b.fsm.DataGroupHomes()
	if len(homes) == 0 {
		return out
	}
	ctx, cancel := b.groupReadContext()
	defer cancel()
	parts := make([][]*group.ConsumerGroup, len(homes))
	inParallel(len(homes), func(i int) error {
		a, err := b.readGroupIn(ctx, homes[i], groupReadCall{Op: groupReadAll})
		if err != nil {
			b.cfg.Logger.Warn("consumer groups: a data group's groups are left out", "group", homes[i], "err", err)
		}
		parts[i] = a.Groups
		return err
	})
	return mergeGroups(out, parts...)
}

// LocalConsumerGroups returns copies of the consumer groups whose state
// this node holds, sorted by name: the meta group's, and those of the
// data groups it holds a replica of that serves. Each group of a data
// group is so reported by each of its home's replicas, as each node
// reports the meta group's (the metrics read it at every scrape, and ask
// no other node).
func (b *Backend) LocalConsumerGroups() []*group.ConsumerGroup {
	out := b.fsm.ConsumerGroups()
	var parts [][]*group.ConsumerGroup
	for _, r := range b.DataGroupReplicas() {
		if dg := b.dataGroup(r.ID); dg != nil && dg.serves() {
			parts = append(parts, dg.fsm.ConsumerGroups())
		}
	}
	return mergeGroups(out, parts...)
}

// LedConsumerGroups returns copies of the consumer groups whose home this
// node leads (the Kafka listener's ListGroups: a coordinator lists the
// groups it coordinates), sorted by name.
func (b *Backend) LedConsumerGroups() []*group.ConsumerGroup {
	var out []*group.ConsumerGroup
	if b.IsLeader() && b.Ready() {
		for _, g := range b.fsm.ConsumerGroups() {
			if b.readHome(g.Name) == 0 {
				out = append(out, g)
			}
		}
	}
	var parts [][]*group.ConsumerGroup
	for _, r := range b.DataGroupReplicas() {
		if dg := b.dataGroup(r.ID); dg != nil && dg.leadsReady() {
			parts = append(parts, dg.fsm.ConsumerGroups())
		}
	}
	return mergeGroups(out, parts...)
}

// mergeGroups merges sorted lists of groups into one sorted by name; a
// name in several (never, but for a replica of a group's home that has
// not applied its deletion yet) is kept once, the first list's.
func mergeGroups(first []*group.ConsumerGroup, more ...[]*group.ConsumerGroup) []*group.ConsumerGroup {
	out := first
	for _, p := range more {
		out = append(out, p...)
	}
	slices.SortStableFunc(out, func(a, b *group.ConsumerGroup) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return slices.CompactFunc(out, func(a, b *group.ConsumerGroup) bool { return a.Name == b.Name })
}

// leaderRead reports whether c is answered by the home's leader only.
func (c *groupReadCall) leaderRead() bool { return c.Leader || c.Op == groupReadExternal }

// ConsumerGroupLeader is ConsumerGroup as the leader of the group's home
// answers it, once it confirmed its leadership: a consistent read of a
// group in a data group, whose replica here may lag its home. A group of
// the meta group is read here: the caller's read index of the meta group
// orders that one.
func (b *Backend) ConsumerGroupLeader(ctx context.Context, name string) (*group.ConsumerGroup, error) {
	home := b.readHome(name)
	if home == 0 {
		return b.fsm.ConsumerGroup(name)
	}
	var out *group.ConsumerGroup
	err := b.inGroup(ctx, home, func(groupHandle) error {
		dg := b.dataGroup(home)
		if dg == nil || !dg.confirmLeader() {
			return fmt.Errorf("%w: data group %d", backend.ErrNotLeader, home)
		}
		var err error
		out, err = dg.fsm.ConsumerGroup(name)
		return err
	}, groupCall{Kind: callGroupRead, GroupRead: &groupReadCall{Op: groupReadOne, Group: name, Leader: true}}, func(a groupAnswer) error {
		r, err := decodeGroupRead(a)
		out = r.Group
		return err
	})
	if err == nil && out == nil {
		err = fmt.Errorf("%w: %q", group.ErrConsumerGroupNotFound, name)
	}
	return out, err
}

// GroupFence returns a consumer group's generation and how many of its
// members of logd's own protocol are live by this node's clock, from its
// home (this node's replica of it, as on the Kafka coordinator, which
// leads it); ok is false when the group does not exist (generation 0).
// A coordinator outside the state machine forms its generations against
// the generation and fences its commits with it (SetGroupOffsets).
func (b *Backend) GroupFence(name string) (generation int64, liveMembers int, ok bool) {
	home := b.readHome(name)
	now := b.cfg.Now().UnixNano()
	if home == 0 {
		return b.fsm.GroupFence(name, max(now, b.fsm.Now()))
	}
	ctx, cancel := b.groupReadContext()
	defer cancel()
	a, err := b.readGroupIn(ctx, home, groupReadCall{Op: groupReadFence, Group: name, Now: now})
	if err != nil {
		return 0, 0, false
	}
	return a.Generation, a.Live, a.Exists
}

// coordinatorHome is the Raft group whose leader coordinates a group for
// the Kafka listener: the meta group for a name that is a share group's
// too (a queue group of its name exists, or share-group settings: the
// share coordinator runs on the meta leader, and a Kafka client finds
// either kind of group with the same FindCoordinator), else the group's
// home. With place, a group without a home yet is placed; without, its
// home is the one it would get now (tentativeHome).
func (n *Node) coordinatorHome(ctx context.Context, name string, place bool) (uint64, error) {
	if n.fsm.QueueGroupNamed(name) || n.fsm.ShareGroupConfig(name) != (backend.ShareGroupConfig{}) {
		return 0, nil
	}
	if place {
		return n.groupHome(ctx, name)
	}
	return n.tentativeHome(name), nil
}

// LeadsGroup reports whether this node leads the Raft group whose leader
// coordinates a group for the Kafka listener (coordinatorHome: the
// group's home, or the meta group for a share group's name) now, ready
// to answer from it (with a barrier of its term applied), and that
// group's term: the Kafka coordinator of a group forgets it when the term
// changes. With place, a group without a home yet is placed first.
func (b *Backend) LeadsGroup(ctx context.Context, name string, place bool) (leads bool, term uint64) {
	home, err := b.coordinatorHome(ctx, name, place)
	if err != nil {
		return false, 0
	}
	if home == 0 {
		if !b.IsLeader() || !b.Ready() {
			return false, 0
		}
		return true, b.raft.CurrentTerm()
	}
	dg := b.dataGroup(home)
	if dg == nil || !dg.leadsReady() {
		return false, 0
	}
	return true, dg.raft.CurrentTerm()
}

// GroupCoordinator returns the node that coordinates a group for the
// Kafka listener (coordinatorHome's leader; "" when none is known),
// without placing a new group: the meta leader for the meta group; for a
// data group, its leader as this node's replica knows it, else as a
// replica of it answers.
func (b *Backend) GroupCoordinator(ctx context.Context, name string) string {
	home, _ := b.coordinatorHome(ctx, name, false)
	if home == 0 {
		_, id := b.raft.LeaderWithID()
		return string(id)
	}
	if dg := b.dataGroup(home); dg != nil {
		if _, id := dg.raft.LeaderWithID(); id != "" {
			return string(id)
		}
	}
	var leader string
	_ = b.askReplica(ctx, home, "", groupCall{Kind: callGroupLeader}, func(a groupAnswer) error {
		if a.Leader == "" {
			return fmt.Errorf("%w: no leader known", errNextReplica)
		}
		leader = a.Leader
		return nil
	})
	return leader
}

// answerGroupLeader answers a callGroupLeader on dg's replica, on node
// self.
func answerGroupLeader(dg *dataGroup, self string) groupAnswer {
	if dg.raft.State() == raft.Leader {
		return groupAnswer{Leader: self}
	}
	_, id := dg.raft.LeaderWithID()
	return groupAnswer{Leader: string(id)}
}
