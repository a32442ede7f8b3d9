package replication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/logd-dev/logd/backend"
	"github.com/logd-dev/logd/queue"
	"github.com/logd-dev/logd/replication/fsm"
)

// Queue groups over data groups (docs/architecture.md, "Data groups").
// A queue group on a topic placed over data groups has a copy in the meta
// group and one in each data group that holds partitions of the topic.
// The meta group's copy holds what the group is (its settings, secret and
// pause) and answers whether it exists; it holds none of the partitions,
// so it delivers nothing. Each data group's copy holds its partitions'
// state: leases, backoff, histories and dead letters. The group's
// dead-letter topic has the topic's placement, so a dead letter is
// written in the same command as the decision that made it.
//
// This node routes each call to the copies that hold what it names: a
// claim to the data groups with claimable records, one after another
// until it has its records; an ack, nack or extend split by its tokens'
// partitions; a release to every data group; a change of settings, a
// pause or a deletion to every copy (data groups first for a deletion,
// the meta group first otherwise); a describe merged from every data
// group's copy (from this node's replica when it caught up, else from a
// replica of the group). A data group's leader proposes its part; a call
// over the Raft port (callQueue) reaches it from any node.

// Calls for queue groups over data groups.
const (
	// callQueue proposes an encoded queue command in the group, at its
	// leader; the answer's Result is the command's result as JSON.
	callQueue = "queue"
	// callQueueRead reads a queue group's copy at any replica.
	callQueueRead = "queue-read"
)

// queueKinds are the commands a callQueue may propose.
var queueKinds = map[fsm.CommandType]bool{
	fsm.CmdQueueCreate: true, fsm.CmdQueueAlter: true, fsm.CmdQueuePause: true,
	fsm.CmdQueueClaim: true, fsm.CmdQueueAck: true, fsm.CmdQueueNack: true, fsm.CmdQueueExtend: true,
	fsm.CmdQueueRelease: true, fsm.CmdQueueSetStarts: true, fsm.CmdQueueDelete: true,
}

// The reads a callQueueRead asks for.
const (
	queueReadDescribe  = "describe"
	queueReadInFlight  = "in-flight"
	queueReadClaimable = "claimable"
)

// queueReadCall asks a replica for its copy of a queue group: a describe,
// the records in flight (at most Limit), or whether a claim could deliver
// now, all at Now (Unix ns).
type queueReadCall struct {
	Op    string `json:"op"`
	Topic string `json:"topic"`
	Group string `json:"group"`
	Now   int64  `json:"now"`
	Limit int    `json:"limit,omitempty"`
}

// queueReadAnswer is a queueReadCall's answer.
type queueReadAnswer struct {
	Info      *backend.QueueGroupInfo `json:"info,omitempty"`
	InFlight  []queue.InFlightRecord  `json:"in_flight,omitempty"`
	More      bool                    `json:"more,omitempty"`
	Claimable bool                    `json:"claimable,omitempty"`
	// Wake is when a claim could deliver next (Unix ns, math.MaxInt64:
	// not before an append).
	Wake int64 `json:"wake,omitempty"`
}

// readQueue answers c from f, a replica's state machine.
func readQueue(f *fsm.FSM, c queueReadCall) (queueReadAnswer, error) {
	var a queueReadAnswer
	var err error
	switch c.Op {
	case queueReadDescribe:
		var info backend.QueueGroupInfo
		info, err = f.DescribeQueueGroup(c.Topic, c.Group, c.Now)
		a.Info = &info
	case queueReadInFlight:
		a.InFlight, a.More, err = f.QueueInFlight(c.Topic, c.Group, c.Now, c.Limit)
	case queueReadClaimable:
		a.Claimable, a.Wake, err = f.QueueClaimable(c.Topic, c.Group, c.Now)
	default:
		err = fmt.Errorf("%w: queue read %q", backend.ErrInvalidArgument, c.Op)
	}
	return a, err
}

// placedQueue returns the data groups that hold partitions of topic when
// it is placed over data groups, in order, and nil otherwise; queue groups
// on such a topic need every member at fsm.PlacedGroupsLevel.
func (b *Backend) placedQueue(topic string) ([]uint64, error) {
	t, err := b.fsm.Topic(topic)
	if err != nil || t.Placement == nil {
		return nil, nil // unknown topics are left to the callers' checks
	}
	if err := b.CheckPlacedGroups(); err != nil {
		return nil, err
	}
	return placementGroups(t.Placement), nil
}

// proposeQueueOn proposes data, an encoded queue command, in the group h
// and returns its result. A creation has the group adopt what the meta
// group placed in it first: the topic and its dead-letter topic.
func proposeQueueOn(ctx context.Context, h groupHandle, data []byte) (any, error) {
	if len(data) == 0 || !queueKinds[fsm.CommandType(data[0])] {
		return nil, fmt.Errorf("%w: not a queue command", backend.ErrInvalidArgument)
	}
	if fsm.CommandType(data[0]) == fsm.CmdQueueCreate && h.adopt != nil {
		h.adopt()
	}
	// Proposing seals the entry in its buffer; the caller's may be sent
	// to other groups at the same time.
	return h.propose(ctx, slices.Clone(data))
}

// queueIn proposes data, an encoded queue command, in data group g (here
// when this node leads it, else at its leader) and returns its result as
// a T (the zero T for a command whose result is nil).
func queueIn[T any](ctx context.Context, b *Backend, g uint64, data []byte) (T, error) {
	var out T
	err := b.inGroup(ctx, g, func(h groupHandle) error {
		res, err := proposeQueueOn(ctx, h, data)
		if err != nil || res == nil {
			return err
		}
		v, ok := res.(T)
		if !ok {
			return fmt.Errorf("data group %d: unexpected result %T", g, res)
		}
		out = v
		return nil
	}, groupCall{Kind: callQueue, Queue: data}, func(a groupAnswer) error {
		if len(a.Result) == 0 || string(a.Result) == "null" {
			return nil
		}
		if err := json.Unmarshal(a.Result, &out); err != nil {
			return fmt.Errorf("data group %d: a queue answer: %w", g, err)
		}
		return nil
	})
	return out, err
}

// queueEverywhere proposes the command encode makes in every data group
// of groups, in parallel; a group's copy that is missing is skipped when
// missingOK.
func queueEverywhere(ctx context.Context, b *Backend, groups []uint64, data []byte, missingOK bool) error {
	errs := inParallel(len(groups), func(i int) error {
		_, err := queueIn[any](ctx, b, groups[i], data)
		if missingOK && errors.Is(err, queue.ErrGroupNotFound) {
			return nil
		}
		return err
	})
	return errors.Join(errs...)
}

// readQueueIn reads c from data group g's copy: this node's replica when
// it caught up, else any replica of the group.
func (b *Backend) readQueueIn(ctx context.Context, g uint64, c queueReadCall) (queueReadAnswer, error) {
	if dg := b.dataGroup(g); dg != nil {
		if dg.serves() && b.atGroupFloor(ctx, dg) {
			return readQueue(dg.fsm, c)
		}
	}
	var out queueReadAnswer
	err := b.askReplica(ctx, g, c.Topic, groupCall{Kind: callQueueRead, QueueRead: &c}, func(a groupAnswer) error {
		if err := answerErr(a); err != nil {
			return err
		}
		if len(a.Result) == 0 {
			return fmt.Errorf("%w: a queue read answer without its result", errNextReplica)
		}
		return json.Unmarshal(a.Result, &out)
	})
	return out, err
}

// createPlacedQueue creates queue group c on a topic placed over the data
// groups groups: the dead-letter topic in the meta group first (with the
// topic's placement, unless it exists), then the group's copy in each data
// group (which adopts the dead-letter topic the meta group made), then
// the meta group's copy, which makes the group exist. A data group that
// has the copy already (an earlier attempt that failed later) is given
// the settings asked for. The meta group's copy is refused with
// queue.ErrGroupExists when the group exists.
func (b *Backend) createPlacedQueue(ctx context.Context, t *fsm.Topic, groups []uint64, c fsm.QueueCreate) (queue.Config, error) {
	if _, _, err := b.fsm.QueueClaimable(c.Topic, c.Group, 0); err == nil {
		return queue.Config{}, fmt.Errorf("%w: %s on topic %s", queue.ErrGroupExists, c.Group, c.Topic)
	}
	cfg := c.Config.WithDefaults(c.Topic, c.Group)
	if _, err := b.fsm.Topic(cfg.DeadLetterTopic); err != nil {
		if _, err := b.createTopic(ctx, fsm.DeadLetterTopicCreate(t, cfg.DeadLetterTopic)); err != nil && !errors.Is(err, backend.ErrTopicExists) {
			return queue.Config{}, fmt.Errorf("dead-letter topic %s: %w", cfg.DeadLetterTopic, err)
		}
	}
	now := b.cfg.Now().UnixNano()
	create, err := fsm.EncodeQueue(fsm.CmdQueueCreate, now, c)
	if err != nil {
		return queue.Config{}, err
	}
	alter, err := fsm.EncodeQueue(fsm.CmdQueueAlter, now, fsm.QueueAlter{Topic: c.Topic, Group: c.Group, Config: cfg})
	if err != nil {
		return queue.Config{}, err
	}
	errs := inParallel(len(groups), func(i int) error {
		_, err := queueIn[queue.Config](ctx, b, groups[i], create)
		if errors.Is(err, queue.ErrGroupExists) {
			_, err = queueIn[queue.Config](ctx, b, groups[i], alter)
		}
		if err != nil {
			return fmt.Errorf("queue group %s/%s in data group %d: %w", c.Topic, c.Group, groups[i], err)
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		return queue.Config{}, err
	}
	res, err := b.proposeQueue(ctx, fsm.CmdQueueCreate, c)
	if err != nil {
		return queue.Config{}, err
	}
	out, _ := res.(queue.Config)
	return out, nil
}

// claimPlaced claims for c from the data groups of a placed topic. It asks
// each group whether a claim could deliver first, so no empty claim is
// proposed, and claims from those that can, one after another from a
// group that turns with each call, until c.Max records (or c.MaxBytes)
// are claimed. A group that fails is passed over; the claim fails only
// when it claimed nothing and a group failed. wake is when a claim could
// deliver next, from the groups' answers (math.MaxInt64: at an append).
func (b *Backend) claimPlaced(ctx context.Context, groups []uint64, c fsm.QueueClaim, level fsm.FeatureLevel) (res backend.QueueClaimResult, wake int64, err error) {
	wake = math.MaxInt64
	if info, err := b.fsm.DescribeQueueGroup(c.Topic, c.Group, 0); err == nil && info.Paused {
		return backend.QueueClaimResult{Paused: true}, wake, nil
	}
	now := b.cfg.Now().UnixNano()
	ready := make([]bool, len(groups))
	wakes := make([]int64, len(groups))
	errs := inParallel(len(groups), func(i int) error {
		a, err := b.readQueueIn(ctx, groups[i], queueReadCall{Op: queueReadClaimable, Topic: c.Topic, Group: c.Group, Now: now})
		ready[i], wakes[i] = a.Claimable, a.Wake
		return err
	})
	var failed error
	for i, err := range errs {
		switch {
		case err != nil:
			failed = err
			ready[i] = true // unknown: try it
		case !ready[i] && wakes[i] != 0:
			wake = min(wake, wakes[i])
		}
	}
	start := int(b.queueTurn.Add(1) % uint64(len(groups)))
	left := c
	for k := range groups {
		i := (start + k) % len(groups)
		if !ready[i] {
			continue
		}
		part, err := queueIn[backend.QueueClaimResult](ctx, b, groups[i], fsm.EncodeQueueClaim(now, left, level))
		if err != nil {
			failed = err
			continue
		}
		res.Records = append(res.Records, part.Records...)
		res.AtCap = append(res.AtCap, part.AtCap...)
		res.DeadLettered += part.DeadLettered
		res.Paused = res.Paused || part.Paused
		left.Max -= int32(len(part.Records))
		if left.MaxBytes > 0 {
			for _, r := range part.Records {
				left.MaxBytes -= int32(len(r.Record.Key) + len(r.Record.Value))
			}
			if left.MaxBytes <= 0 {
				break
			}
		}
		if left.Max <= 0 {
			break
		}
	}
	if len(res.Records) == 0 && failed != nil {
		return backend.QueueClaimResult{}, wake, failed
	}
	slices.Sort(res.AtCap)
	return res, wake, nil
}

// waitPlacedClaim is QueueClaimWait on a placed topic: claims (claimPlaced
// proposes none where nothing is claimable) until one delivers records
// or reports partitions at their cap, or the deadline. Between them it
// waits for an append or a returned record in a data group this node
// holds a replica of, for the earliest wake the groups gave, or at most
// remotePoll, since nothing in another node's replica can wake it.
func (b *Backend) waitPlacedClaim(ctx context.Context, groups []uint64, c backend.QueueClaim, deadline time.Time, admit func(context.Context) error) (backend.QueueClaimResult, error) {
	level, err := b.featureLevel()
	if err != nil {
		return backend.QueueClaimResult{}, err
	}
	for {
		var chans []<-chan struct{}
		for _, g := range groups {
			dg := b.dataGroup(g)
			if dg == nil {
				continue
			}
			if t, err := dg.fsm.Topic(c.Topic); err == nil {
				for _, p := range t.Partitions {
					if p != nil {
						chans = append(chans, p.Changed())
					}
				}
				chans = append(chans, dg.fsm.QueueReturned(c.Topic, c.Group))
			}
		}
		if admit != nil {
			if err := admit(ctx); err != nil {
				return backend.QueueClaimResult{}, err
			}
		}
		res, wake, err := b.claimPlaced(ctx, groups, fsm.QueueClaim(c), level)
		if err != nil {
			return backend.QueueClaimResult{}, err
		}
		now := time.Now()
		if len(res.Records) > 0 || len(res.AtCap) > 0 || res.Paused || !now.Before(deadline) {
			return res, nil
		}
		wait := min(deadline.Sub(now), remotePoll)
		if wake != math.MaxInt64 {
			wait = min(wait, time.Duration(wake-b.Now().UnixNano()))
		}
		timer := time.NewTimer(max(wait, time.Millisecond))
		err = waitAny(ctx, append(chans, nil), timer.C)
		timer.Stop()
		if err != nil {
			return backend.QueueClaimResult{}, err
		}
	}
}

// tokensPlaced proposes, per data group, the part of a token command
// (ack, nack or extend) naming that group's partitions, and merges the
// results in the tokens' order. part makes a group's command from the
// positions of its tokens.
func (b *Backend) tokensPlaced(ctx context.Context, topic string, partitions []int32, part func(now int64, positions []int) ([]byte, error)) (backend.QueueTokensResult, error) {
	t, err := b.fsm.Topic(topic)
	if err != nil {
		return backend.QueueTokensResult{}, err
	}
	byGroup := map[uint64][]int{}
	var groups []uint64
	for i, p := range partitions {
		if p < 0 || int(p) >= len(t.Placement) {
			return backend.QueueTokensResult{}, fmt.Errorf("%w: token of partition %d; %s has %d", queue.ErrBadToken, p, topic, len(t.Placement))
		}
		g := t.Placement[p]
		if _, ok := byGroup[g]; !ok {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], i)
	}
	now := b.cfg.Now().UnixNano()
	out := backend.QueueTokensResult{Results: make([]queue.TokenResult, len(partitions))}
	parts := make([]backend.QueueTokensResult, len(groups))
	errs := inParallel(len(groups), func(i int) error {
		data, err := part(now, byGroup[groups[i]])
		if err != nil {
			return err
		}
		parts[i], err = queueIn[backend.QueueTokensResult](ctx, b, groups[i], data)
		if err == nil && len(parts[i].Results) != len(byGroup[groups[i]]) {
			err = fmt.Errorf("data group %d: %d results for %d tokens", groups[i], len(parts[i].Results), len(byGroup[groups[i]]))
		}
		return err
	})
	if err := errors.Join(errs...); err != nil {
		return backend.QueueTokensResult{}, err
	}
	for i, g := range groups {
		for j, pos := range byGroup[g] {
			out.Results[pos] = parts[i].Results[j]
		}
		out.DeadLettered += parts[i].DeadLettered
	}
	return out, nil
}

// pick returns the elements of s at positions.
func pick[T any](s []T, positions []int) []T {
	out := make([]T, len(positions))
	for i, p := range positions {
		out[i] = s[p]
	}
	return out
}

// describePlaced merges a queue group's description from the meta
// group's copy (what the group is) and each data group's (its
// partitions' state).
func (b *Backend) describePlaced(groups []uint64, topic, name string, now int64) (backend.QueueGroupInfo, error) {
	info, err := b.fsm.DescribeQueueGroup(topic, name, now)
	if err != nil {
		return info, err
	}
	t, err := b.fsm.Topic(topic)
	if err != nil {
		return info, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ApplyTimeout)
	defer cancel()
	parts := make([]queueReadAnswer, len(groups))
	errs := inParallel(len(groups), func(i int) error {
		var err error
		parts[i], err = b.readQueueIn(ctx, groups[i], queueReadCall{Op: queueReadDescribe, Topic: topic, Group: name, Now: now})
		if err == nil && parts[i].Info == nil {
			err = fmt.Errorf("data group %d: a describe without its group", groups[i])
		}
		return err
	})
	if err := errors.Join(errs...); err != nil {
		return backend.QueueGroupInfo{}, err
	}
	info.Backlog, info.ExactBytes, info.DrainPerSec, info.OldestAppend = queue.Backlog{}, true, 0, 0
	for i, g := range groups {
		gi := parts[i].Info
		info.Backlog.Records += gi.Backlog.Records
		info.Backlog.Bytes += gi.Backlog.Bytes
		info.ExactBytes = info.ExactBytes && gi.ExactBytes
		info.DrainPerSec += gi.DrainPerSec
		if gi.OldestAppend != 0 && (info.OldestAppend == 0 || gi.OldestAppend < info.OldestAppend) {
			info.OldestAppend = gi.OldestAppend
		}
		for _, p := range gi.Partitions {
			if p.Partition >= 0 && int(p.Partition) < len(info.Partitions) && t.Placement[p.Partition] == g {
				info.Partitions[p.Partition] = p
			}
		}
	}
	return info, nil
}

// inFlightPlaced merges the records in flight of every data group's
// copy, by partition and offset, at most limit (limit <= 0: all).
func (b *Backend) inFlightPlaced(groups []uint64, topic, name string, now int64, limit int) ([]queue.InFlightRecord, bool, error) {
	if _, _, err := b.fsm.QueueClaimable(topic, name, 0); err != nil {
		return nil, false, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ApplyTimeout)
	defer cancel()
	parts := make([]queueReadAnswer, len(groups))
	errs := inParallel(len(groups), func(i int) error {
		var err error
		parts[i], err = b.readQueueIn(ctx, groups[i], queueReadCall{Op: queueReadInFlight, Topic: topic, Group: name, Now: now, Limit: limit})
		return err
	})
	if err := errors.Join(errs...); err != nil {
		return nil, false, err
	}
	var out []queue.InFlightRecord
	more := false
	for _, p := range parts {
		out = append(out, p.InFlight...)
		more = more || p.More
	}
	slices.SortFunc(out, func(a, b queue.InFlightRecord) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	if limit > 0 && len(out) > limit {
		out, more = out[:limit], true
	}
	return out, more, nil
}

// setStartsPlaced moves the starts of a placed topic's queue group in the
// data groups that hold the partitions named (the meta group's copy holds
// none of them), once every member's build applies it.
func (b *Backend) setStartsPlaced(ctx context.Context, topic, name string, starts []queue.PartitionStart) error {
	if err := b.CheckQueueStarts(); err != nil {
		return err
	}
	t, err := b.fsm.Topic(topic)
	if err != nil {
		return err
	}
	byGroup := map[uint64][]queue.PartitionStart{}
	var groups []uint64
	for _, st := range starts {
		if st.Partition < 0 || int(st.Partition) >= len(t.Placement) {
			return fmt.Errorf("%w: partition %d; %s has %d", queue.ErrInvalidRequest, st.Partition, topic, len(t.Placement))
		}
		g := t.Placement[st.Partition]
		if _, ok := byGroup[g]; !ok {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], st)
	}
	now := b.cfg.Now().UnixNano()
	errs := inParallel(len(groups), func(i int) error {
		data, err := fsm.EncodeJSON(fsm.CmdQueueSetStarts, now, fsm.QueueSetStarts{Topic: topic, Group: name, Starts: byGroup[groups[i]]})
		if err != nil {
			return err
		}
		_, err = queueIn[any](ctx, b, groups[i], data)
		return err
	})
	return errors.Join(errs...)
}
